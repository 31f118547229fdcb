"""``home jmfts ...`` (run the server, set up the embedder) and ``home memory ...`` (use it).

Exit codes: 0 ok; 1 the operation failed (not found, refused, unreachable); 2 bad usage or
input.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table
from rich.tree import Tree

from home.jmfts.client import SyncJmftsClient
from home.jmfts.errors import InvalidInput, JmftsError
from home.jmfts.locate import locate_memory_server
from home.jmfts.models import DEFAULT_HOST, DEFAULT_PORT, MEMORY_KINDS, memory_kinds_filter
from home.substrate.options import DataDir
from shared.cli import CommandApp
from shared.lifecycle import until_signalled

DEFAULT_SERVE_DIR = Path.home() / ".local" / "share" / "tether" / "jmfts"

console = Console()

jmfts_app = CommandApp(
    help="Run the JMFTS memory server standalone, and prepare its embedder.",
    no_args_is_help=True,
    add_completion=False,
)
memory_app = CommandApp(
    help="Read and write the shared memory (JMFTS) of the running home found through "
    "--data-dir, as its admin principal; --url and --token-file name another server.",
    no_args_is_help=True,
    add_completion=False,
)
triples_app = CommandApp(help="Bitemporal facts: add, list (as of a time).", no_args_is_help=True)
memory_app.add_typer(triples_app, name="triples")

ServeDir = Annotated[
    Path, typer.Option("--data-dir", help="JMFTS state directory (SQLite, FAISS, admin.token).")
]
Url = Annotated[
    str | None,
    typer.Option(
        "--url",
        help="Base URL of a JMFTS server to use instead of the running home's "
        "(e.g. a standalone `home jmfts serve`).",
    ),
]
TokenFile = Annotated[
    Path | None,
    typer.Option(
        "--token-file",
        help="Bearer token file (default: the home's admin token, DATA_DIR/jmfts/admin.token).",
    ),
]
AsJson = Annotated[bool, typer.Option("--json", help="Machine-readable output on stdout.")]


# -- home jmfts --------------------------------------------------------------------------


@jmfts_app.command()
def serve(
    data_dir: ServeDir = DEFAULT_SERVE_DIR,
    host: Annotated[str, typer.Option(help="Interface to listen on (loopback by default).")] = (
        DEFAULT_HOST
    ),
    port: Annotated[int, typer.Option(help="TCP port; 0 picks a free one.")] = DEFAULT_PORT,
    index: Annotated[
        str, typer.Option(help="FAISS index: hnsw (approximate; exact when small) or flat.")
    ] = "hnsw",
    embedder: Annotated[
        str,
        typer.Option(
            help="Embedder: minilm-onnx (fp32) or minilm-onnx-int8 (about 3x faster, "
            "cosine 0.97+ to fp32; a store keeps the one it was built with)."
        ),
    ] = "minilm-onnx",
    synchronous: Annotated[
        str,
        typer.Option(
            help="SQLite fsync policy: FULL (an acked write survives power loss) or NORMAL "
            "(it survives kill -9 but not power loss; commits ~20x cheaper)."
        ),
    ] = "FULL",
    as_json: AsJson = False,
) -> None:
    """Serve JMFTS over HTTP until Ctrl-C; prints the URL it listens on (OpenAPI at /docs)."""
    # Imported here so `home memory ...` (a thin HTTP client) never loads the server stack.
    from home.jmfts.config import JmftsConfig  # noqa: PLC0415
    from home.jmfts.server import JmftsServer  # noqa: PLC0415

    if index not in ("flat", "hnsw"):
        raise InvalidInput(f"--index {index!r}: expected flat or hnsw")
    if synchronous not in ("FULL", "NORMAL"):
        raise InvalidInput(f"--synchronous {synchronous!r}: expected FULL or NORMAL")
    config = JmftsConfig(
        data_dir=data_dir,
        host=host,
        port=port,
        index_kind=index,  # type: ignore[arg-type]
        embedder=embedder,
        synchronous=synchronous,  # type: ignore[arg-type]
    )

    async def run() -> None:
        server = JmftsServer(config)
        await server.start()
        try:
            store = server.store
            info = {
                "url": server.url,
                "docs": server.url + "/docs",
                "data_dir": str(data_dir),
                "admin_token_file": str(server.admin_token_file),
                "index_rebuilt": bool(store and store.index_rebuilt),
                "vectors": store.index.count if store else 0,
            }
            if as_json:
                print(json.dumps(info), flush=True)
            else:
                console.print(
                    f"JMFTS listening on [bold]{info['url']}[/bold] (OpenAPI: {info['docs']})\n"
                    f"  data: {data_dir}\n  admin token: {info['admin_token_file']}\n"
                    f"  vectors: {info['vectors']}"
                    + ("  (index rebuilt from SQLite)" if info["index_rebuilt"] else "")
                )
                sys.stdout.flush()
            await until_signalled()
        finally:
            await server.close()

    try:
        asyncio.run(run())
    except OSError as exc:
        raise JmftsError(f"cannot serve on {host}:{port} from {data_dir}: {exc}") from exc


@jmfts_app.command()
def setup(
    force: Annotated[bool, typer.Option(help="Re-export even when a valid graph exists.")] = False,
    cache_dir: Annotated[
        Path | None, typer.Option(help="Where to write the graph [default: in the venv].")
    ] = None,
) -> None:
    """Export all-MiniLM-L6-v2 to ONNX once (the only step that uses torch) and cache it."""
    from home.jmfts.embedder import MANIFEST_FILE, OnnxManifest  # noqa: PLC0415
    from home.jmfts.onnx_export import export  # noqa: PLC0415

    with console.status("exporting all-MiniLM-L6-v2 to ONNX (torch, once)…"):
        target = export(cache_dir, force=force)
    manifest = OnnxManifest.read(target)
    console.print(
        f"ONNX graph ready: {target} (sha256 {manifest.onnx_sha256[:16]}…, {MANIFEST_FILE})"
    )


# -- home memory -------------------------------------------------------------------------


@contextmanager
def _connected(
    data_dir: Path, url: str | None, token_file: Path | None
) -> Iterator[SyncJmftsClient]:
    """A client of the home's memory server (or the one named); HomeNotRunning if there is
    none to find."""
    server = locate_memory_server(data_dir, url, token_file)
    with SyncJmftsClient.from_token_file(server.url, server.token_file) as client:
        yield client


def _print_json(value: Any) -> None:
    print(json.dumps(value, indent=2, default=str))


@memory_app.command()
def put(
    data_dir: DataDir,
    path: Annotated[str, typer.Argument(help="Titled path, e.g. workspace/notes/x.")],
    text: Annotated[str, typer.Argument(help="The document's content.")],
    usetype: Annotated[str | None, typer.Option(help="Usetype of the leaf.")] = None,
    url: Url = None,
    token_file: TokenFile = None,
    as_json: AsJson = False,
) -> None:
    """Write TEXT at PATH (parents created); findable as soon as this returns."""
    with _connected(data_dir, url, token_file) as client:
        doc = client.put(path, text, usetype=usetype)
    if as_json:
        _print_json(doc.data)
    else:
        console.print(f"wrote #{doc.id} at {path}")


@memory_app.command()
def get(
    data_dir: DataDir,
    path: Annotated[str, typer.Argument(help="Titled path, or a document id (#12).")],
    url: Url = None,
    token_file: TokenFile = None,
    as_json: AsJson = False,
) -> None:
    """Print one document."""
    with _connected(data_dir, url, token_file) as client:
        doc = client.resolve(path)
    if as_json:
        _print_json(doc.data)
    else:
        console.print(f"[bold]#{doc.id} {doc.title or ''}[/bold] ({doc.usetype or '-'})")
        console.print(doc.content or "")


@memory_app.command()
def tree(
    data_dir: DataDir,
    path: Annotated[str | None, typer.Argument(help="Subtree root [default: all roots].")] = None,
    depth: Annotated[int, typer.Option(help="How deep to show.")] = 3,
    url: Url = None,
    token_file: TokenFile = None,
    as_json: AsJson = False,
) -> None:
    """Show the document tree (titles and ids)."""
    with _connected(data_dir, url, token_file) as client:
        tops = [client.resolve(path)] if path else client.roots()
        subtrees = [client.subtree(d.id, max_depth=depth) for d in tops]
    if as_json:
        _print_json({"trees": subtrees})
        return
    view = Tree("[bold]memory[/bold]")
    for sub in subtrees:
        nodes = {sub["root"]["id"]: view.add(_label(sub["root"]))}
        for doc in sub["descendants"]:
            parent = nodes.get(doc["parent_id"], view)
            nodes[doc["id"]] = parent.add(_label(doc))
    console.print(view)


def _label(doc: dict[str, Any]) -> str:
    usetype = f" [dim]({doc['usetype']})[/dim]" if doc.get("usetype") else ""
    return f"{doc.get('title') or '(untitled)'} [dim]#{doc['id']}[/dim]{usetype}"


@memory_app.command()
def search(
    data_dir: DataDir,
    query: Annotated[str, typer.Argument(help="What to look for.")],
    method: Annotated[str, typer.Option(help="vector | fulltext | hybrid")] = "hybrid",
    limit: Annotated[int, typer.Option(min=1, max=100)] = 10,
    root: Annotated[
        list[str] | None, typer.Option(help="Only under this path (repeatable).")
    ] = None,
    usetype: Annotated[str | None, typer.Option(help="Only this usetype (glob).")] = None,
    kind: Annotated[
        list[str] | None,
        typer.Option(
            help="Only memories of this kind (repeatable): " + ", ".join(MEMORY_KINDS) + "."
        ),
    ] = None,
    threshold: Annotated[float, typer.Option(help="Vector: minimum cosine score.")] = 0.0,
    as_of: Annotated[
        datetime | None,
        typer.Option(
            "--as-of",
            formats=["%Y-%m-%dT%H:%M:%S%z", "%Y-%m-%dT%H:%M:%S.%f%z", "%Y-%m-%dT%H:%M:%S"],
            help="What memory held at this time (ISO-8601): records written by then, "
            "not yet superseded or retracted by then.",
        ),
    ] = None,
    url: Url = None,
    token_file: TokenFile = None,
    as_json: AsJson = False,
) -> None:
    """Search memory. JSON: {"results": [{id, path, title, snippet, score, ...}], ...}.

    Example: home memory search "what does she like" --kind preference
    """
    if method not in ("vector", "fulltext", "hybrid"):
        raise InvalidInput(f"--method {method!r}: expected vector, fulltext or hybrid")
    if kind:
        unknown = [k for k in kind if k not in MEMORY_KINDS]
        if unknown or usetype is not None:
            raise InvalidInput(
                f"--kind {', '.join(unknown)}: expected {', '.join(MEMORY_KINDS)}"
                if unknown
                else "--kind and --usetype: give one or the other"
            )
    globs, excluded = memory_kinds_filter(kind) if kind else (None, None)
    with _connected(data_dir, url, token_file) as client:
        roots = [client.resolve(r).id for r in root or []] or None
        extra: dict[str, Any] = {
            "roots": roots,
            "usetype": globs or usetype,
            "exclude_types": excluded,
        }
        if as_of is not None:
            extra["as_of"] = (as_of if as_of.tzinfo else as_of.replace(tzinfo=UTC)).isoformat()
        if method == "vector":
            extra["threshold"] = threshold
        response = client.search(query, method, limit, **extra)
    keys = ("id", "path", "title", "snippet", "score", "usetype", "created_at", "age")
    hits = response["results"]
    if kind:  # memories only: a container (a title, no text) is none
        hits = [hit for hit in hits if (hit.get("document") or {}).get("content")]
    results = [{k: hit[k] for k in keys} for hit in hits]
    if as_json:
        _print_json({"results": results, "score_kind": response["score_kind"]})
        return
    table = Table(title=f"{method} search: {query!r} ({response['score_kind']} scores)")
    for column in ("score", "path", "age", "snippet"):
        table.add_column(column)
    for hit in results:
        table.add_row(f"{hit['score']:.4f}", hit["path"], hit["age"], hit["snippet"][:80])
    console.print(table)


@memory_app.command()
def grant(
    data_dir: DataDir,
    path: Annotated[str, typer.Argument(help="Subtree to grant (path or #id).")],
    principal: Annotated[str, typer.Argument(help="Principal name (created if missing).")],
    level: Annotated[str, typer.Option(help="read | write (write implies read)")] = "read",
    url: Url = None,
    token_file: TokenFile = None,
    as_json: AsJson = False,
) -> None:
    """Grant PRINCIPAL read or write on the subtree at PATH."""
    if level not in ("read", "write"):
        raise InvalidInput(f"--level {level!r}: expected read or write")
    with _connected(data_dir, url, token_file) as client:
        doc = client.resolve(path)
        pid = client.principal_id(principal, create=True)
        result = client.request(
            "POST",
            f"/access/documents/{doc.id}/grants",
            json={"principal_id": pid, "level": level},
        )
    if as_json:
        _print_json(result)
    else:
        console.print(f"{principal} may now {level} {path} (#{doc.id})")


@memory_app.command()
def token(
    data_dir: DataDir,
    principal: Annotated[str, typer.Argument(help="Principal name (created if missing).")],
    label: Annotated[str | None, typer.Option(help="A note to recognise the token by.")] = None,
    revoke: Annotated[int | None, typer.Option(help="Revoke this token id instead.")] = None,
    url: Url = None,
    token_file: TokenFile = None,
    as_json: AsJson = False,
) -> None:
    """Mint a bearer token for PRINCIPAL (shown once), or --revoke one."""
    with _connected(data_dir, url, token_file) as client:
        if revoke is not None:
            result = client.request("DELETE", f"/access/tokens/{revoke}")
        else:
            pid = client.principal_id(principal, create=True)
            result = client.request(
                "POST", f"/access/principals/{pid}/tokens", json={"label": label}
            )
    if as_json:
        _print_json(result)
    elif revoke is not None:
        console.print(f"revoked token {revoke}")
    else:
        console.print(f"token for {principal} (id {result['id']}; shown once):")
        print(result["token"])


@triples_app.command("add")
def triples_add(
    data_dir: DataDir,
    subject: Annotated[str, typer.Argument(help="Subject document (path or #id).")],
    predicate: Annotated[str, typer.Argument(help="Predicate name (created if missing).")],
    obj: Annotated[str, typer.Argument(metavar="OBJECT", help="A literal, or a path with --doc.")],
    doc: Annotated[bool, typer.Option("--doc", help="OBJECT is a document path.")] = False,
    url: Url = None,
    token_file: TokenFile = None,
    as_json: AsJson = False,
) -> None:
    """Record SUBJECT PREDICATE OBJECT, valid from now."""
    with _connected(data_dir, url, token_file) as client:
        subject_id = client.resolve(subject).id
        found = [p for p in client.request("GET", "/triples/predicates") if p["name"] == predicate]
        pred = (
            found[0]
            if found
            else client.request("POST", "/triples/predicates", json={"name": predicate})
        )
        body: dict[str, Any] = {"subject_id": subject_id, "predicate_id": pred["id"]}
        if doc:
            body["object_id"] = client.resolve(obj).id
        else:
            body["object_literal"] = obj
        result = client.request("POST", "/triples", json=body)
    if as_json:
        _print_json(result)
    else:
        console.print(f"triple #{result['id']}: {subject} {predicate} {obj}")


@triples_app.command("list")
def triples_list(
    data_dir: DataDir,
    subject: Annotated[str | None, typer.Argument(help="Only about this document.")] = None,
    as_of: Annotated[
        str | None, typer.Option(help="Record time: what was believed then (ISO-8601).")
    ] = None,
    current: Annotated[bool, typer.Option(help="Only triples not invalidated.")] = False,
    url: Url = None,
    token_file: TokenFile = None,
    as_json: AsJson = False,
) -> None:
    """List triples, optionally about SUBJECT and as of a time."""
    with _connected(data_dir, url, token_file) as client:
        params: dict[str, Any] = {"include_invalidated": not current}
        if subject:
            params["entity_id"] = client.resolve(subject).id
        if as_of:
            params["as_of"] = as_of
        rows = client.request("GET", "/triples/query", params=params)
    if as_json:
        _print_json({"triples": rows})
        return
    table = Table(title="triples")
    for column in ("id", "subject", "predicate", "object", "recorded", "invalidated"):
        table.add_column(column)
    for t in rows:
        obj = t["object"]["title"] if t["object"] else t["object_literal"]
        table.add_row(
            str(t["id"]),
            t["subject"]["title"] or "",
            t["predicate"]["name"],
            str(obj),
            t["recorded_at"] or "",
            t["invalidated_at"] or "",
        )
    console.print(table)
