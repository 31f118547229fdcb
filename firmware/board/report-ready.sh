#!/bin/sh
# ExecStartPost of tether-edge.service. For a Type=notify unit systemd runs it
# only after the service sent READY=1 on $NOTIFY_SOCKET, so this line on the
# console is the readiness line `firmware boot-test` waits for. It is written
# by systemd's ordering, not by the service: a service that never reports
# ready never gets it printed.
echo "tether-edge: ready (READY=1 received on NOTIFY_SOCKET)" > /dev/console
echo "tether-edge: ready (READY=1 received on NOTIFY_SOCKET)"
