"""Print what making a DynamoDB client costs, in CPU: from a new botocore session (a cold process, or a SnapStart restore
that drops the session whole) and from a new session handed the loader of one that already parsed the models (what
interlude.sdk_clients.forget_clients does after a restore; ADR 0107). Medians over fresh interpreters; and from a new session of a process that reads only the SDK data the layer ships
(interlude.adapters.sdk_data, written here into a temporary directory; sdk_clients.use_packaged_models).
Usage: .venv/bin/python bench/client_creation.py [rounds]
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "layers" / "core" / "python"))

PROBE = r"""
import json, time, botocore.session
held = botocore.session.get_session()
held.create_client("dynamodb")  # the process's first client: its session parses the models
started = time.process_time()
botocore.session.get_session().create_client("dynamodb")
new_session = time.process_time() - started
fresh = botocore.session.get_session()
fresh.register_component("data_loader", held.get_component("data_loader"))
started = time.process_time()
fresh.create_client("dynamodb")
print(json.dumps({"new": new_session, "kept": time.process_time() - started}))
"""
PACKAGED_PROBE = r"""
import json, time
from interlude import sdk_clients
imported = time.process_time()
sdk_clients.use_packaged_models()
sdk_clients.client("dynamodb")
print(json.dumps({"packaged": time.process_time() - imported}))
"""


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    env = {
        **os.environ,
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": "bench",
    }
    from interlude import sdk_clients
    from interlude.adapters import sdk_data
    from interlude.config.runtime import SDK_DATA_ENV

    with tempfile.TemporaryDirectory(prefix="client-creation-") as layer:
        packaged = {
            **env,
            SDK_DATA_ENV: str(Path(layer) / sdk_clients.PACKAGED_MODELS),
            "PYTHONPATH": str(ROOT / "layers" / "core" / "python"),
        }
        sdk_data.write(Path(packaged[SDK_DATA_ENV]))
        found = [{**_probe(PROBE, env), **_probe(PACKAGED_PROBE, packaged)} for _ in range(rounds)]
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"rounds={rounds}, CPU ms of one DynamoDB client, medians; load average {load}")
    print(f"  from a new session: {statistics.median(f['new'] for f in found) * 1000:.1f} ms")
    print(
        f"  from a new session given the parsed models' loader: {statistics.median(f['kept'] for f in found) * 1000:.1f} ms"
    )
    print(
        f"  the process's first, from the layer's SDK data: {statistics.median(f['packaged'] for f in found) * 1000:.1f} ms"
    )


def _probe(code: str, env: dict[str, str]) -> dict[str, float]:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    found: dict[str, float] = json.loads(done.stdout)
    return found


if __name__ == "__main__":
    main()
