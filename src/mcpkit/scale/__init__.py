"""Scale-out on Redis: several workers (processes or machines) serving one endpoint.

- :mod:`mcpkit.scale.backend`: a worker's connection (ordered writes, pub/sub, heartbeat);
- :mod:`mcpkit.scale.bus`: the notification bus across workers;
- :mod:`mcpkit.scale.sessions`: legacy session records and resumable event logs;
- :mod:`mcpkit.scale.tasks`: task records (the tasks extension), for every worker.

The HTTP transport uses them when ``MCPKIT_REDIS_URL`` (or
``HTTPSettings.redis_url``) is set, and a server's tasks when it is (or
``TaskSettings.redis_url``); see ``docs/scale-out.md``. Needs the
``redis`` extra (``pip install 'mcpkit[redis]'``); nothing here is imported
otherwise.
"""
