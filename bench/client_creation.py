"""Print what making a DynamoDB client costs, in CPU: from a new boto3 session (a cold process, or a SnapStart restore
that drops the session whole) and from a new session handed the loader of one that already parsed the models (what
interlude.adapters.sdk_clients.forget_clients does after a restore; ADR 0107). Medians over fresh interpreters.
Usage: .venv/bin/python bench/client_creation.py [rounds]
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys

PROBE = r"""
import json, time, boto3, botocore.session
boto3.client("dynamodb")  # the process's first client: its session parses the models
held = boto3.DEFAULT_SESSION
boto3.DEFAULT_SESSION = None
started = time.process_time()
boto3.client("dynamodb")
new_session = time.process_time() - started
fresh = botocore.session.get_session()
fresh.register_component("data_loader", held._session.get_component("data_loader"))
boto3.setup_default_session(botocore_session=fresh)
started = time.process_time()
boto3.client("dynamodb")
print(json.dumps({"new": new_session, "kept": time.process_time() - started}))
"""


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    env = {
        **os.environ,
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": "bench",
    }
    found = [
        json.loads(
            subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=env, check=True).stdout
        )
        for _ in range(rounds)
    ]
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"rounds={rounds}, CPU ms of one DynamoDB client, medians; load average {load}")
    print(f"  from a new session: {statistics.median(f['new'] for f in found) * 1000:.1f} ms")
    print(
        f"  from a new session given the parsed models' loader: {statistics.median(f['kept'] for f in found) * 1000:.1f} ms"
    )


if __name__ == "__main__":
    main()
