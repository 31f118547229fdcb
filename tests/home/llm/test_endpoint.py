"""The embedded endpoint per answer mode: what rides in every request's body."""

from __future__ import annotations

from dataclasses import replace

from home.llm.endpoint import (
    EMBEDDED_ANSWER_MODE,
    EMBEDDED_MAX_TOKENS,
    EMBEDDED_SAMPLING,
    PROSE_MAX_TOKENS,
    AnswerMode,
    Sampling,
    embedded_endpoint,
    forced_tool_choice,
)


def test_the_shipped_mode_answers_in_prose_with_no_tool_named() -> None:
    assert EMBEDDED_ANSWER_MODE is AnswerMode.PROSE
    endpoint = embedded_endpoint("http://127.0.0.1:1/v1", "speak")
    assert "tool_choice" not in endpoint.extra_body
    assert "tool_choice" not in endpoint.tau_entry()["extra_body"]


def test_forced_tool_mode_names_the_answer_tool_and_no_tool_names_nothing() -> None:
    forced = embedded_endpoint("http://127.0.0.1:1/v1", "speak", AnswerMode.FORCED_TOOL)
    assert forced.extra_body["tool_choice"] == forced_tool_choice("speak")
    toolless = embedded_endpoint("http://127.0.0.1:1/v1", None, AnswerMode.FORCED_TOOL)
    assert "tool_choice" not in toolless.extra_body


def test_sampling_rides_in_the_request() -> None:
    endpoint = embedded_endpoint(
        "http://127.0.0.1:1/v1", "speak", sampling=Sampling(temperature=0.5, repeat_penalty=1.2)
    )
    entry = endpoint.tau_entry()
    assert entry["temperature"] == 0.5
    assert entry["extra_body"]["repeat_penalty"] == 1.2


def test_a_seed_rides_in_the_request_only_when_one_is_given() -> None:
    url = "http://127.0.0.1:1/v1"
    seeded = embedded_endpoint(url, "speak", sampling=replace(EMBEDDED_SAMPLING, seed=7))
    assert seeded.tau_entry()["extra_body"]["seed"] == 7
    assert "seed" not in embedded_endpoint(url, "speak").tau_entry()["extra_body"]


def test_prose_answers_stream_and_forced_tool_calls_do_not() -> None:
    url = "http://127.0.0.1:1/v1"
    assert embedded_endpoint(url, "speak").tau_entry()["stream"] is True
    assert embedded_endpoint(url, None).tau_entry()["stream"] is True
    forced = embedded_endpoint(url, "speak", AnswerMode.FORCED_TOOL)
    assert forced.tau_entry()["stream"] is False


def test_a_spoken_prose_answers_cap_is_a_setting_of_prose_mode_only() -> None:
    url = "http://127.0.0.1:1/v1"
    assert embedded_endpoint(url, "speak").tau_entry()["max_tokens"] == EMBEDDED_MAX_TOKENS
    capped = embedded_endpoint(url, "speak", prose_max_tokens=PROSE_MAX_TOKENS)
    assert capped.tau_entry()["max_tokens"] == PROSE_MAX_TOKENS
    forced = embedded_endpoint(url, "speak", AnswerMode.FORCED_TOOL, prose_max_tokens=8)
    assert forced.max_tokens == EMBEDDED_MAX_TOKENS
    assert embedded_endpoint(url, None, prose_max_tokens=8).max_tokens == EMBEDDED_MAX_TOKENS
