"""A verb's call under a grammar: the grammar llama.cpp compiles for any turn, the reader
that lets nothing but the schema's object of the turn's own words through, and (on a real
bus) a desk whose model writes anything at all: an invalid call never reaches an effector,
and the speaker is asked again. The embedded model writing calls for real is measured on
the call set's halves in tests/home/intent/test_calls_model.py."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from home.intent.calls import (
    MAX_CALL_CHARS,
    MAX_CALL_WORDS,
    PARAMETERS,
    NoCall,
    VerbCall,
    call_grammar,
    call_messages,
    call_words,
    read_call,
)
from home.intent.step import Verb
from home.llm.model_file import packaged_gguf
from tests.support.json_strategy import json_values

NOTE = "note that the boiler was serviced today"
VERBS = sorted(PARAMETERS, key=lambda v: v.value)

# Words a recogniser writes, and the odd unicode a typed turn may hold.
words = st.lists(
    st.text(alphabet="abcdefghijklmnopqrstuvwxyz'0123456789", min_size=1, max_size=8),
    min_size=1, max_size=MAX_CALL_WORDS + 10,
)  # fmt: skip
utterances = words.map(" ".join) | st.text(min_size=1, max_size=300)


def valid(call: VerbCall, utterance: str) -> bool:
    """Every value consecutive words of the turn, every required one there."""
    said = " " + " ".join(call_words(utterance)) + " "
    for parameter in PARAMETERS[call.verb]:
        value = call.arguments[parameter.name]
        if value == "" and not parameter.required:
            continue
        if not value or f" {value} " not in said:
            return False
    return set(call.arguments) == {p.name for p in PARAMETERS[call.verb]}


def calls_for(verb: Verb, utterance: str) -> st.SearchStrategy[str]:
    """Replies shaped like a call: the schema's keys (or nearly), values that are runs of the
    turn's words, other words, other JSON types, or nothing."""
    said = call_words(utterance) or ["x"]
    runs = st.tuples(st.integers(0, len(said)), st.integers(0, len(said))).map(
        lambda ij: " ".join(said[min(ij) : max(ij)])
    )
    values = runs | st.text(max_size=30) | json_values(max_leaves=4)
    keys = [p.name for p in PARAMETERS[verb]]
    objects = st.fixed_dictionaries({k: values for k in keys}) | st.dictionaries(
        st.sampled_from([*keys, "text", "when", "extra"]), values, max_size=4
    )
    return objects.map(json.dumps) | st.text(max_size=200) | json_values().map(json.dumps)


# -- the reader: the effectors' guard ----------------------------------------------------


@pytest.mark.parametrize("verb", VERBS, ids=lambda v: v.value)
@given(data=st.data())
def test_a_random_reply_is_a_valid_call_or_none(verb: Verb, data: st.DataObject) -> None:
    utterance = data.draw(utterances, label="utterance")
    raw = data.draw(calls_for(verb, utterance), label="reply")
    call = read_call(verb, utterance, raw)
    assert call is None or (call.verb is verb and valid(call, utterance))


@given(raw=st.text(min_size=MAX_CALL_CHARS + 1, max_size=MAX_CALL_CHARS + 50))
@example(raw='{"text": "' + "a " * MAX_CALL_CHARS + '"}')
@example(raw="[" * 10_000)
def test_an_oversize_or_deep_reply_is_no_call(raw: str) -> None:
    assert read_call(Verb.NOTE, "a " * 20, raw) is None


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        ('{"text": "the boiler was serviced today"}', None),
        ('{"text": "serviced today"}', None),
        ('{"text": "the boiler was"}', "a note runs to the end of what was said"),
        ('{"text": ""}', "a required value is empty"),
        ('{"text": "the boiler was serviced yesterday"}', "words not said"),
        ('{"text": "the boiler  was serviced today"}', "not single-spaced"),
        ('{"text": "today serviced"}', "words said, not in that order"),
        ("{}", "a key missing"),
        ('{"text": "today", "title": "boiler"}', "a key not in the schema"),
        ('{"text": 3}', "a value not a string"),
        ('{"text": "today"', "not JSON"),
        ('["today"]', "not an object"),
    ],
)
def test_the_reader_takes_only_the_schema_object_of_the_turns_words(
    raw: str, why: str | None
) -> None:
    call = read_call(Verb.NOTE, NOTE, raw)
    assert (call is not None) == (why is None), why


@pytest.mark.parametrize(
    ("raw", "about"),
    [('{"about": ""}', ""), ('{"about": "my old phone"}', "my old phone"),
     ('{"about": "phone my"}', None), ('{"about": null}', None)],
)  # fmt: skip
def test_an_optional_value_may_be_empty_or_any_run(raw: str, about: str | None) -> None:
    call = read_call(Verb.FORGET, "forget what i said about my old phone number", raw)
    assert (call and call["about"]) if about else call is None or call["about"] == about


@pytest.mark.parametrize(
    "verb", [Verb.REMIND, Verb.CANCEL_REMINDER, Verb.LIST_REMINDERS, Verb.CHAT]
)
def test_a_verb_the_model_never_writes_has_no_call(verb: Verb) -> None:
    assert read_call(verb, "remind me in ten minutes", "{}") is None


# -- the grammar: what llama.cpp compiles ---------------------------------------------------


@pytest.fixture(scope="module")
def compiles() -> Iterator[Callable[[str], bool]]:
    """Whether llama.cpp's own grammar parser takes a grammar, against the embedded model's
    vocabulary (the server builds its sampler the same way)."""
    import llama_cpp  # noqa: PLC0415 (loads llama.cpp)

    # (verbose: llama-cpp-python's quiet mode leaves /dev/null open.)
    model = llama_cpp.Llama(str(packaged_gguf()), vocab_only=True, verbose=True)
    vocab = llama_cpp.llama_model_get_vocab(model._model.model)

    def parse(grammar: str) -> bool:
        sampler = llama_cpp.llama_sampler_init_grammar(vocab, grammar.encode(), b"root")
        if not sampler:
            return False
        llama_cpp.llama_sampler_free(sampler)
        return True

    yield parse
    model.close()


def test_llama_cpp_refuses_a_broken_grammar(compiles: Callable[[str], bool]) -> None:
    assert compiles('root ::= "a"')
    assert not compiles('root ::= "a')
    assert not compiles("root ::= undefined")


@pytest.mark.parametrize("verb", VERBS, ids=lambda v: v.value)
@given(utterance=utterances)
def test_llama_cpp_compiles_the_grammar_of_any_turn(
    compiles: Callable[[str], bool], verb: Verb, utterance: str
) -> None:
    if not call_words(utterance):
        with pytest.raises(NoCall, match="without words"):
            call_grammar(verb, utterance)
        return
    grammar = call_grammar(verb, utterance)
    assert compiles(grammar), grammar
    # Two rules, then one a word read, whatever the turn's length.
    assert grammar.count("::=") == len(call_words(utterance)) + 2


def test_the_grammar_names_the_tools_own_parameters() -> None:
    from home.tau_extensions.verbs import VERBS as TOOLS  # noqa: PLC0415

    note = call_grammar(Verb.NOTE, "note that the boiler was serviced")
    assert list(TOOLS["journal_append"].parameters["properties"]) == ["text"]
    assert note.startswith('root ::= "{\\"text\\": \\"" tail "\\""')
    ask = call_grammar(Verb.ASK_OPERATOR, "ask the operator about the car")
    assert '\\"text\\": \\"' in ask


def test_the_model_is_shown_only_the_turns_words_and_the_verbs_examples() -> None:
    messages = call_messages(Verb.NOTE, "Note that: the BOILER was serviced!")
    assert messages[-1] == {"role": "user", "content": "note that the boiler was serviced"}
    assert "text: the note to append" in messages[0]["content"]
    assert [m["role"] for m in messages[1:-1]] == ["user", "assistant"] * (len(messages[1:-1]) // 2)
