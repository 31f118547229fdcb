"""The memory reflex's machinery: recall before every turn, memorize off the turn.

τ loads :mod:`home.tau_extensions.memory_reflex` by path; that file is glue, and the work is
here, in modules that do one thing each: configuration (:mod:`.config`), the memories
the reflex searches and deposits over the JMFTS client (:mod:`.memories`), the pure recall
gate and rendering (:mod:`.recall`), FSRS review decay (:mod:`.fsrs`), the evaluator's
prompt, parsing and deduplication (:mod:`.evaluator`), the keep gate that decides whether an
utterance holds anything worth keeping (:mod:`.keep_gate`), what a recogniser puts ahead of
the point (:mod:`.spoken`), the draft in the user's own words (:mod:`.restate`), the one
path from what was said to what is stored (:mod:`.extract`) and the check that a memory
holds only what was said (:mod:`.fidelity`, re-run on stored memories by :mod:`.audit`),
the typed records and the on-disk ledger (:mod:`.records`), and threshold calibration and
the judge, with their CLI (:mod:`.calibrate`, :mod:`.cli`, :mod:`.judge`).

Errors raised here, under :class:`shared.errors.TetherError`::

    MemoryReflexError
    ├── MemoryConfigError   (ConfigurationError) a config key is missing, mistyped or out
    │                       of range (named)
    ├── LedgerError         the search ledger or review book cannot be read or written
    │   └── LedgerUnreadable (InputError) it cannot be read, or a record is malformed
    ├── KeepGateError       the keep gate's examples unreadable, or its embedder failed
    └── RestatementError    ``home memory judge``: the home's model config unreadable, or
                            the model asked for facts gave no chat completion

JMFTS unreachable, or refusing a request, is :class:`home.jmfts.errors.JmftsError` (with
its ``status`` and ``detail``), raised by the one client under :mod:`.memories`.
"""
