"""The offline bridge checker: compare an edge half and a home half before anything is deployed.

Pure: takes two :class:`~shared.schema.BridgeHalf` values, returns findings.
Subject comparisons use NATS wildcard semantics (:mod:`shared.subjects`): an
export ``a.*.c`` is carried by an import ``a.>``; an import narrower than the
export is a finding that names what would be dropped.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from enum import StrEnum

from shared.schema.bridge_half import BridgeHalf, SubjectDecl, ssh_fingerprint
from shared.subjects import (
    ANSWER_RAIL,
    REPORT_RAILS,
    PatternIndex,
    device_of,
    intersection,
    is_audio_subject,
    overlaps,
    rail_pattern,
)

# Rails that carry memory text: the memory reflex's reports (recall: the utterance
# searched; memorize: the facts kept) and a delegation's answer (what the operator found).
MEMORY_TEXT_SUBJECTS = tuple(rail_pattern(rail) for rail in (*REPORT_RAILS, ANSWER_RAIL))


class Severity(StrEnum):
    """How bad a finding is: errors fail the check, warnings do not."""

    ERROR = "error"
    WARNING = "warning"


@dataclass(frozen=True)
class Rule:
    """One checker rule: a stable id, a short name, and its severity."""

    id: str
    name: str
    severity: Severity


RULES = {
    r.id: r
    for r in (
        Rule("B001", "pair.sides", Severity.ERROR),
        Rule("B002", "pair.bridge-name", Severity.ERROR),
        Rule("B003", "pair.device", Severity.ERROR),
        Rule("B004", "endpoint.port", Severity.ERROR),
        Rule("B005", "endpoint.host-key", Severity.ERROR),
        Rule("B006", "endpoint.host-key-unpinned", Severity.WARNING),
        Rule("B007", "endpoint.client-key", Severity.ERROR),
        Rule("B008", "endpoint.client-key-unset", Severity.WARNING),
        Rule("B009", "endpoint.user", Severity.ERROR),
        Rule("B010", "export.not-imported", Severity.ERROR),
        Rule("B011", "export.narrowed", Severity.ERROR),
        Rule("B012", "import.not-exported", Severity.ERROR),
        Rule("B020", "text-only.audio", Severity.ERROR),
        Rule("B021", "side.import-and-export", Severity.ERROR),
        Rule("B022", "device.foreign", Severity.ERROR),
        Rule("B023", "export.memory-text", Severity.ERROR),
        Rule("B030", "limits.receiver-smaller", Severity.WARNING),
    )
}


@dataclass(frozen=True)
class Finding:
    """One problem: rule, severity, where (file and line), and what to do about it."""

    rule: str
    name: str
    severity: Severity
    file: str
    line: int | None
    message: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        return f"{where}: {self.severity}[{self.rule} {self.name}]: {self.message}"

    def to_dict(self) -> dict[str, object]:
        """JSON-ready form."""
        data = asdict(self)
        data["severity"] = str(self.severity)
        return data


def _finding(rule_id: str, file: str, line: int | None, message: str) -> Finding:
    rule = RULES[rule_id]
    return Finding(rule.id, rule.name, rule.severity, file, line, message)


def check_pair(first: BridgeHalf, second: BridgeHalf) -> list[Finding]:
    """Every finding for a pair of halves (given edge first, home second, or either order)."""
    findings: list[Finding] = []
    for half in (first, second):
        findings.extend(check_half(half))
    if {first.side, second.side} != {"edge", "home"}:
        findings.append(
            _finding(
                "B001",
                second.file,
                second.line_of("side"),
                f"both halves are side {first.side!r} ({first.file} and {second.file}); "
                "a bridge pairs one 'edge' half with one 'home' half",
            )
        )
        return findings
    edge, home = (first, second) if first.side == "edge" else (second, first)
    if edge.bridge != home.bridge:
        findings.append(
            _finding(
                "B002",
                home.file,
                home.line_of("bridge"),
                f"home half is for bridge {home.bridge!r} but the edge half ({edge.file}) is "
                f"for {edge.bridge!r}: these are halves of two different bridges",
            )
        )
    if edge.device != home.device:
        findings.append(
            _finding(
                "B003",
                home.file,
                home.line_of("device"),
                f"home half maps the link to device {home.device!r} but the edge half "
                f"({edge.file}) is device {edge.device!r}; pair the board again or fix one",
            )
        )
    findings.extend(_check_endpoints(edge, home))
    findings.extend(_check_directions(edge, home))
    findings.extend(_check_directions(home, edge))
    findings.extend(_check_limits(edge, home))
    findings.extend(_check_limits(home, edge))
    return findings


def check_half(half: BridgeHalf) -> list[Finding]:
    """Findings about one half on its own: audio, loops, other devices' subjects."""
    findings: list[Finding] = []
    for direction, decls in (("exports", half.exports), ("imports", half.imports)):
        for decl in decls:
            if is_audio_subject(decl.subject):
                findings.append(
                    _finding(
                        "B020",
                        half.file,
                        decl.line,
                        f"{direction} {decl.subject!r} could carry audio "
                        "(events.audio.> or a sound token); only text crosses a bridge: "
                        "narrow the subject so no audio rail matches it",
                    )
                )
            named = device_of(decl.subject)
            if named is not None and named != half.device:
                findings.append(
                    _finding(
                        "B022",
                        half.file,
                        decl.line,
                        f"{direction} {decl.subject!r} names device {named!r}, but this half "
                        f"is device {half.device!r}; a link may only carry its own device's rails",
                    )
                )
    if half.side == "home":
        findings += _check_memory_exports(half)
    imports = PatternIndex(half.import_patterns)
    for exp in half.exports:
        for position in imports.overlapping(exp.subject):
            imp = half.imports[position]
            both = intersection(exp.subject, imp.subject)
            findings.append(
                _finding(
                    "B021",
                    half.file,
                    imp.line,
                    f"{imp.subject!r} is imported and {exp.subject!r} (line {exp.line}) is "
                    f"exported by the same half; {both!r} would echo back across the link. "
                    "Keep each subject on one side of the crossing",
                )
            )
    return findings


def _check_memory_exports(half: BridgeHalf) -> list[Finding]:
    """No memory crosses: the reflex's reports carry memory text (queries, facts)."""
    findings = []
    for decl in half.exports:
        for rail in MEMORY_TEXT_SUBJECTS:
            if overlaps(decl.subject, rail):
                findings.append(
                    _finding(
                        "B023",
                        half.file,
                        decl.line,
                        f"exports {decl.subject!r}, which takes "
                        f"{intersection(decl.subject, rail)!r}: the memory reflex's reports "
                        "and a delegation's answers carry memory text, and no memory leaves "
                        "home; drop the export (the TUI reads the reports on home's NATS "
                        "with --direct)",
                    )
                )
    return findings


def _check_endpoints(edge: BridgeHalf, home: BridgeHalf) -> list[Finding]:
    out: list[Finding] = []
    conn, listen = edge.endpoint, home.endpoint
    if conn.port != listen.port:
        out.append(
            _finding(
                "B004",
                edge.file,
                conn.line_of("port"),
                f"edge connects to port {conn.port} but home listens on {listen.port} "
                f"({home.file}:{listen.line_of('port')})",
            )
        )
    if conn.host_key is None or listen.host_key is None:
        missing = edge if conn.host_key is None else home
        out.append(
            _finding(
                "B006",
                missing.file,
                missing.endpoint.line,
                "no host key pinned yet; run `bridge pair` to generate keys and fill it in "
                "(a link without a pinned host key is refused at connect)",
            )
        )
    elif ssh_fingerprint(conn.host_key) != ssh_fingerprint(listen.host_key):
        out.append(
            _finding(
                "B005",
                edge.file,
                conn.line_of("host_key"),
                f"edge pins host key {ssh_fingerprint(conn.host_key)} but home presents "
                f"{ssh_fingerprint(listen.host_key)} ({home.file}:{listen.line_of('host_key')}); "
                "the edge would refuse the connection",
            )
        )
    if conn.client_key is None or listen.client_key is None:
        missing = edge if conn.client_key is None else home
        field = "client_key" if missing is edge else "authorized_key"
        out.append(
            _finding(
                "B008",
                missing.file,
                missing.endpoint.line,
                f"{field} is not set; run `bridge pair` so home knows this board's key",
            )
        )
    elif ssh_fingerprint(conn.client_key) != ssh_fingerprint(listen.client_key):
        out.append(
            _finding(
                "B007",
                home.file,
                listen.line_of("authorized_key"),
                f"home authorizes key {ssh_fingerprint(listen.client_key)} but the edge uses "
                f"{ssh_fingerprint(conn.client_key)} ({edge.file}:{conn.line_of('client_key')})",
            )
        )
    if conn.user and listen.user and conn.user != listen.user:
        out.append(
            _finding(
                "B009",
                edge.file,
                conn.line_of("user"),
                f"edge logs in as {conn.user!r} but home expects {listen.user!r}",
            )
        )
    return out


def _check_directions(sender: BridgeHalf, receiver: BridgeHalf) -> list[Finding]:
    """Every export of ``sender`` must be imported by ``receiver``, and vice versa.

    Indexed by token (:class:`PatternIndex`): a hello is outside input, and comparing
    every export with every import would be quadratic in what the peer declares.
    """
    out: list[Finding] = []
    imports = receiver.import_patterns
    import_index = PatternIndex(imports)
    for exp in sender.exports:
        if import_index.covering(exp.subject):
            continue
        partial = [imports[i] for i in import_index.overlapping(exp.subject)]
        if partial:
            out.append(
                _finding(
                    "B011",
                    sender.file,
                    exp.line,
                    f"export {exp.subject!r} is wider than what the {receiver.side} half imports "
                    f"({', '.join(repr(p) for p in partial)}, {receiver.file}); subjects matching "
                    f"{exp.subject!r} outside those would be dropped",
                )
            )
        else:
            out.append(
                _finding(
                    "B010",
                    sender.file,
                    exp.line,
                    f"export {exp.subject!r} is not imported by the {receiver.side} half "
                    f"({receiver.file}); every event on it would be dropped there. Add it to "
                    f"that half's imports or remove it here",
                )
            )
    export_index = PatternIndex(sender.export_patterns)
    for imp in receiver.imports:
        if not export_index.overlapping(imp.subject):
            out.append(
                _finding(
                    "B012",
                    receiver.file,
                    imp.line,
                    f"import {imp.subject!r} is exported by nothing on the {sender.side} half "
                    f"({sender.file}); it would never receive anything",
                )
            )
    return out


def _check_limits(sender: BridgeHalf, receiver: BridgeHalf) -> list[Finding]:
    out: list[Finding] = []
    for key in ("max_event_bytes", "max_string_bytes"):
        sent, accepted = getattr(sender.limits, key), getattr(receiver.limits, key)
        if sent > accepted:
            out.append(
                _finding(
                    "B030",
                    receiver.file,
                    receiver.line_of("limits"),
                    f"{receiver.side} accepts {key} {accepted} but the {sender.side} half sends "
                    f"up to {sent}; events between the two sizes would be refused on arrival",
                )
            )
    return out


def has_errors(findings: list[Finding]) -> bool:
    """True if any finding is an error."""
    return any(f.severity is Severity.ERROR for f in findings)


def sort_findings(findings: list[Finding]) -> list[Finding]:
    """Errors first, then by file and line."""
    return sorted(findings, key=lambda f: (f.severity != Severity.ERROR, f.file, f.line or 0))


__all__ = [
    "RULES",
    "Finding",
    "Rule",
    "Severity",
    "SubjectDecl",
    "check_half",
    "check_pair",
    "has_errors",
    "sort_findings",
]
