"""Reading ``edge.yaml``: every problem reported at once, each with its file, line and key."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from edge.config.model import (
    DEFAULT_FAILURE_NOTICE,
    DEFAULT_NOTICE,
    AsrConfig,
    AudioConfig,
    AudioInput,
    AudioOutput,
    BridgeConfig,
    DeviceInput,
    DeviceOutput,
    EchoGateConfig,
    EdgeConfig,
    EndpointingConfig,
    NatsConfig,
    NoticeConfig,
    PushToTalkConfig,
    RunConfig,
    SpoolInput,
    SpoolOutput,
    TtsConfig,
    VadConfig,
    WakeConfig,
    WavInput,
    WavOutput,
)
from edge.models import DEFAULT_PIPER_VOICE, DEFAULT_VOSK_MODEL
from shared.subjects import NAME_TOKEN
from shared.yaml_source import LocatedDict, Reader, load_yaml, parse_yaml

_TOP_KEYS = (
    "device",
    "nats",
    "audio",
    "endpointing",
    "asr",
    "tts",
    "echo_gate",
    "notice",
    "bridge",
    "run",
)


def load_edge_config(path: str | Path) -> EdgeConfig:
    """Read and validate ``edge.yaml``; SchemaError lists every problem with file and line."""
    file = Path(path)
    return _build(load_yaml(file), str(file), file.parent)


def parse_edge_config(text: str, file: str = "<edge.yaml>", base: Path | None = None) -> EdgeConfig:
    """Validate ``edge.yaml`` text (for tests and generated configs)."""
    return _build(parse_yaml(text, file), file, base or Path.cwd())


def _build(doc: Any, file: str, base: Path) -> EdgeConfig:
    r = _ConfigReader(file, base)
    if doc is None:
        return EdgeConfig()
    top = r.mapping(doc, "")
    r.allow_keys(top, "", _TOP_KEYS)
    config = EdgeConfig(
        device=r.get(top, "device", "", str, "board", required=False, check=_device_check),
        nats=r.nats(r.section(top, "nats")),
        audio=r.audio(r.section(top, "audio")),
        endpointing=r.endpointing(r.section(top, "endpointing")),
        asr=r.asr(r.section(top, "asr")),
        tts=r.tts(r.section(top, "tts")),
        echo_gate=r.echo_gate(r.section(top, "echo_gate")),
        notice=r.notice(r.section(top, "notice")),
        bridge=r.bridge(r.section(top, "bridge")),
        run=r.run(r.section(top, "run")),
    )
    r.raise_if_any()
    return config


def _device_check(value: str) -> str | None:
    if NAME_TOKEN.fullmatch(value):
        return None
    return f"must be one lowercase token [a-z0-9_-]+ (it becomes a subject token), got {value!r}"


def _positive(value: float) -> str | None:
    return None if value > 0 else f"must be greater than 0, got {value}"


def _not_negative(value: float) -> str | None:
    return None if value >= 0 else f"must be 0 or more, got {value}"


def _one_of(*choices: str) -> Any:
    def check(value: str) -> str | None:
        return None if value in choices else f"must be one of {', '.join(choices)}, got {value!r}"

    return check


_NUMBER = (int, float)


class _ConfigReader(Reader):
    """A :class:`Reader` that knows the sections of ``edge.yaml``."""

    def __init__(self, file: str, base: Path) -> None:
        super().__init__(file)
        self.base = base

    def section(self, parent: LocatedDict, key: str, path: str = "") -> LocatedDict | None:
        full = f"{path}.{key}" if path else key
        if key not in parent or parent[key] is None:
            return None
        return self.mapping(parent[key], full, parent, key)

    def path(self, data: LocatedDict, key: str, path: str) -> Path | None:
        raw: str | None = self.get(data, key, path, (str, type(None)), None, required=False)
        if raw is None:
            return None
        if not raw.strip():
            self.issue(data, key, f"{path}.{key}", "must be a path, got an empty string")
            return None
        candidate = Path(raw).expanduser()
        return candidate if candidate.is_absolute() else self.base / candidate

    def model_ref(self, data: LocatedDict, key: str, path: str, default: str) -> str:
        raw = self.get(data, key, path, str, default, required=False)
        if raw.startswith("package:") or Path(raw).expanduser().is_absolute():
            return raw
        return str(self.base / raw)

    def nats(self, data: LocatedDict | None) -> NatsConfig:
        if data is None:
            return NatsConfig()
        self.allow_keys(data, "nats", ("host", "port"))
        return NatsConfig(
            host=self.get(data, "host", "nats", str, "127.0.0.1", required=False),
            port=self.get(
                data,
                "port",
                "nats",
                int,
                0,
                required=False,
                check=lambda v: None if 0 <= v <= 65535 else f"must be 0..65535, got {v}",
            ),
        )

    def audio(self, data: LocatedDict | None) -> AudioConfig:
        if data is None:
            return AudioConfig()
        self.allow_keys(data, "audio", ("input", "output", "block_ms"))
        return AudioConfig(
            input=self._audio_input(self.section(data, "input", "audio")),
            output=self._audio_output(self.section(data, "output", "audio")),
            block_ms=self.get(
                data,
                "block_ms",
                "audio",
                int,
                AudioConfig.block_ms,
                required=False,
                check=_positive,
            ),
        )

    def _audio_end(self, data: LocatedDict, path: str) -> tuple[str, Path | None, bool, str | None]:
        """kind, then its one location: ``path`` (wav), ``dir`` (spool) or ``device``."""
        self.allow_keys(data, path, ("kind", "path", "dir", "realtime", "device"))
        kind = self.get(
            data, "kind", path, str, "sounddevice", check=_one_of("sounddevice", "wav", "spool")
        )
        file = self.path(data, "path", path)
        folder = self.path(data, "dir", path)
        realtime = self.get(data, "realtime", path, bool, True, required=False)
        device: str | None = self.get(data, "device", path, (str, type(None)), None, required=False)
        owners = {"path": "wav", "dir": "spool", "device": "sounddevice"}
        for key, owner in owners.items():
            if key in data and kind != owner:
                self.issue(data, key, f"{path}.{key}", f"applies to kind {owner} only")
        needed = {"wav": ("path", file), "spool": ("dir", folder)}.get(kind)
        if needed is not None and needed[1] is None and data.get(needed[0]) is None:
            self.issue(data, None, f"{path}.{needed[0]}", f"is required when kind is {kind}")
        if kind == "spool" and "realtime" in data:
            self.issue(data, "realtime", f"{path}.realtime", "a spool is always real time")
        return kind, folder if kind == "spool" else file, realtime, device

    def _audio_input(self, data: LocatedDict | None) -> AudioInput:
        if data is None:
            return DeviceInput()
        kind, where, realtime, device = self._audio_end(data, "audio.input")
        if kind == "wav" and where is not None:
            return WavInput(where, realtime)
        if kind == "spool" and where is not None:
            return SpoolInput(where)
        return DeviceInput(device)

    def _audio_output(self, data: LocatedDict | None) -> AudioOutput:
        if data is None:
            return DeviceOutput()
        kind, where, realtime, device = self._audio_end(data, "audio.output")
        if kind == "wav" and where is not None:
            return WavOutput(where, realtime)
        if kind == "spool" and where is not None:
            return SpoolOutput(where)
        return DeviceOutput(device)

    def endpointing(self, data: LocatedDict | None) -> EndpointingConfig:
        if data is None:
            return EndpointingConfig()
        self.allow_keys(data, "endpointing", ("mode", "vad", "push_to_talk", "wake"))
        mode = self.get(
            data,
            "mode",
            "endpointing",
            str,
            "vad",
            required=False,
            check=_one_of("vad", "push_to_talk", "both", "wake"),
        )
        ptt = self._push_to_talk(self.section(data, "push_to_talk", "endpointing"))
        if mode in ("push_to_talk", "both") and ptt.source == "none":
            self.issue(
                data,
                "mode",
                "endpointing.mode",
                f"{mode} needs a button: set endpointing.push_to_talk.source to key or gpio",
            )
        return EndpointingConfig(
            mode=mode,  # type: ignore[arg-type]
            vad=self._vad(self.section(data, "vad", "endpointing")),
            push_to_talk=ptt,
            wake=self._wake(self.section(data, "wake", "endpointing")),
        )

    def _wake(self, data: LocatedDict | None) -> WakeConfig:
        if data is None:
            return WakeConfig()
        p, d = "endpointing.wake", WakeConfig()
        self.allow_keys(
            data, p, ("model", "cutoff", "listen_s", "follow_up_s", "question_s", "chime")
        )
        models = ("okay_nabu", "hey_jarvis", "hey_mycroft", "alexa")
        cutoff: float | None = self.get(
            data,
            "cutoff",
            p,
            (*_NUMBER, type(None)),
            None,
            required=False,
            check=lambda v: None if v is None or 0 < v < 1 else f"must be in (0, 1), got {v}",
        )

        def seconds(key: str, default: float) -> float:
            return float(self.get(data, key, p, _NUMBER, default, required=False, check=_positive))

        check = _one_of(*models)
        model: str = self.get(data, "model", p, str, d.model, required=False, check=check)
        return WakeConfig(
            model=model,  # type: ignore[arg-type]
            cutoff=None if cutoff is None else float(cutoff),
            listen_s=seconds("listen_s", d.listen_s),
            follow_up_s=seconds("follow_up_s", d.follow_up_s),
            question_s=seconds("question_s", d.question_s),
            chime=self.get(data, "chime", p, bool, d.chime, required=False),
        )

    def _vad(self, data: LocatedDict | None) -> VadConfig:
        if data is None:
            return VadConfig()
        p = "endpointing.vad"
        self.allow_keys(
            data,
            p,
            (
                "threshold_db",
                "start_ms",
                "end_silence_ms",
                "stable_end_ms",
                "pre_roll_ms",
                "max_utterance_s",
            ),
        )
        d = VadConfig()
        return VadConfig(
            threshold_db=float(
                self.get(
                    data,
                    "threshold_db",
                    p,
                    _NUMBER,
                    d.threshold_db,
                    required=False,
                    check=lambda v: None if v < 0 else f"must be below 0 dBFS, got {v}",
                )
            ),
            start_ms=self.get(
                data, "start_ms", p, int, d.start_ms, required=False, check=_positive
            ),
            end_silence_ms=self.get(
                data, "end_silence_ms", p, int, d.end_silence_ms, required=False, check=_positive
            ),
            stable_end_ms=self.get(
                data, "stable_end_ms", p, int, d.stable_end_ms, required=False, check=_not_negative
            ),
            pre_roll_ms=self.get(
                data, "pre_roll_ms", p, int, d.pre_roll_ms, required=False, check=_not_negative
            ),
            max_utterance_s=float(
                self.get(
                    data,
                    "max_utterance_s",
                    p,
                    _NUMBER,
                    d.max_utterance_s,
                    required=False,
                    check=_positive,
                )
            ),
        )

    def _push_to_talk(self, data: LocatedDict | None) -> PushToTalkConfig:
        if data is None:
            return PushToTalkConfig()
        p = "endpointing.push_to_talk"
        self.allow_keys(data, p, ("source", "key", "value_path", "active_low", "poll_ms"))
        source = self.get(
            data, "source", p, str, "none", required=False, check=_one_of("none", "key", "gpio")
        )
        value_path = self.path(data, "value_path", p)
        if source == "gpio" and value_path is None:
            self.issue(
                data,
                None,
                f"{p}.value_path",
                "is required when source is gpio (e.g. /sys/class/gpio/gpio17/value)",
            )
        return PushToTalkConfig(
            source=source,  # type: ignore[arg-type]
            key=self.get(
                data,
                "key",
                p,
                str,
                " ",
                required=False,
                check=lambda v: None if len(v) == 1 else f"must be one character, got {v!r}",
            ),
            value_path=value_path,
            active_low=self.get(data, "active_low", p, bool, True, required=False),
            poll_ms=self.get(data, "poll_ms", p, int, 10, required=False, check=_positive),
        )

    def asr(self, data: LocatedDict | None) -> AsrConfig:
        if data is None:
            return AsrConfig()
        self.allow_keys(data, "asr", ("model", "grammar", "partials"))
        grammar: tuple[str, ...] | None = None
        if data.get("grammar") is not None:
            phrases = self.str_list(
                data,
                "grammar",
                "asr",
                check=lambda v: None if v.strip() else "must be a non-empty phrase",
            )
            grammar = tuple(phrase for phrase, _ in phrases)
            if not grammar and isinstance(data.get("grammar"), list):
                self.issue(
                    data, "grammar", "asr.grammar", "must list at least one phrase, or be null"
                )
        return AsrConfig(
            model=self.model_ref(data, "model", "asr", DEFAULT_VOSK_MODEL),
            grammar=grammar,
            partials=self.get(data, "partials", "asr", bool, True, required=False),
        )

    def tts(self, data: LocatedDict | None) -> TtsConfig:
        if data is None:
            return TtsConfig()
        self.allow_keys(data, "tts", ("voice", "length_scale", "first_clause_words", "threads"))
        scale: float | None = self.get(
            data, "length_scale", "tts", (int, float, type(None)), None, required=False
        )
        if scale is not None and scale <= 0:
            self.issue(data, "length_scale", "tts.length_scale", f"must be above 0, got {scale}")
            scale = None
        return TtsConfig(
            voice=self.model_ref(data, "voice", "tts", DEFAULT_PIPER_VOICE),
            length_scale=None if scale is None else float(scale),
            first_clause_words=self.get(
                data,
                "first_clause_words",
                "tts",
                int,
                TtsConfig.first_clause_words,
                required=False,
                check=_not_negative,
            ),
            threads=self.get(
                data, "threads", "tts", int, TtsConfig.threads, required=False, check=_not_negative
            ),
        )

    def echo_gate(self, data: LocatedDict | None) -> EchoGateConfig:
        if data is None:
            return EchoGateConfig()
        self.allow_keys(data, "echo_gate", ("tail_ms",))
        return EchoGateConfig(
            tail_ms=self.get(
                data, "tail_ms", "echo_gate", int, 300, required=False, check=_not_negative
            )
        )

    def notice(self, data: LocatedDict | None) -> NoticeConfig:
        if data is None:
            return NoticeConfig()
        self.allow_keys(data, "notice", ("text", "failure_text"))

        def sentence(key: str, default: str) -> str:
            return self.get(
                data, key, "notice", str, default, required=False,
                check=lambda v: None if v.strip() else "must be a sentence to speak",
            )  # fmt: skip

        return NoticeConfig(
            text=sentence("text", DEFAULT_NOTICE),
            failure_text=sentence("failure_text", DEFAULT_FAILURE_NOTICE),
        )

    def bridge(self, data: LocatedDict | None) -> BridgeConfig:
        if data is None:
            return BridgeConfig()
        self.allow_keys(data, "bridge", ("half", "secrets", "outbox"))
        return BridgeConfig(
            half=self.path(data, "half", "bridge"),
            secrets=self.path(data, "secrets", "bridge"),
            outbox=self.path(data, "outbox", "bridge"),
        )

    def run(self, data: LocatedDict | None) -> RunConfig:
        if data is None:
            return RunConfig()
        self.allow_keys(data, "run", ("answer_timeout_s",))
        return RunConfig(
            answer_timeout_s=float(
                self.get(
                    data,
                    "answer_timeout_s",
                    "run",
                    _NUMBER,
                    30.0,
                    required=False,
                    check=_not_negative,
                )
            )
        )
