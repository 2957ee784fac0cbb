"""The functions' runtime Python for `make test`, without changing the system.

CPython of the runtime's version (interlude_cdk.layer.PYTHON_VERSION) comes from Debian's package archive: apt runs
on a configuration of its own under .cache/runtime-python (its own sources, package lists, downloads and an empty
package status; nothing under /etc or /var changes), and `dpkg -x` unpacks the interpreter's packages there, C library
included. That C library is newer than this machine's, so patchelf points the interpreter's ELF loader and RPATH at
the unpacked copies: it then runs as any executable, and so does every subprocess of its sys.executable.
A virtual environment on it (.venv-runtime by default) gets the package with its development dependencies, at the
versions the development venv (the one running this script) has.

Idempotent: with the same script, runtime version and development venv, a second run changes nothing and reaches no
network. Delete .cache/runtime-python (or pass --refresh) for the archive's newest build of that version.
Environment: RUNTIME_PYTHON_MIRROR overrides the Debian mirror (by default the one this machine's apt uses).
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
CACHE = PROJECT / ".cache" / "runtime-python"
ROOT = CACHE / "root"
PYTHON_STAMP = CACHE / "python.json"
DEFAULT_VENV = PROJECT / ".venv-runtime"
# The runtime's version is declared once, beside the Lambda runtime it names (read without importing the CDK).
LAYER_MODULE = PROJECT / "infra" / "interlude_cdk" / "layer.py"
# testing first: its packages migrated together, so they install together; unstable when testing lacks the version.
SUITES = ("testing", "unstable")
KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"
# Modules built against libraries the interpreter's own packages bring: importing them proves the loader paths.
SMOKE = "import ctypes, bz2, decimal, lzma, sqlite3, ssl, uuid, zlib, zoneinfo; import sys; print(sys.version.split()[0])"


def runtime_version() -> str:
    for node in ast.parse(LAYER_MODULE.read_text()).body:
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["PYTHON_VERSION"]:
            return str(ast.literal_eval(node.value))
    raise SystemExit(f"error: no PYTHON_VERSION in {LAYER_MODULE}")


def interpreter(version: str) -> Path:
    """Where the unpacked (and patched) interpreter of version lives."""
    return ROOT / "usr" / "bin" / f"python{version}"


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _os_codename(os_release: Path) -> str:
    for line in os_release.read_text().splitlines():
        if line.startswith("VERSION_CODENAME="):
            return line.partition("=")[2].strip('"')
    return ""


def _apt_sources(etc: Path) -> list[tuple[list[str], list[str]]]:
    """(URIs, suites) of every deb source under etc (apt's configuration directory), one-line or deb822."""
    sources = []
    for path in [etc / "sources.list", *sorted((etc / "sources.list.d").glob("*.list"))]:
        for line in path.read_text().splitlines() if path.is_file() else ():
            words = [w for w in line.split("#")[0].split() if not (w.startswith("[") or w.endswith("]") or "=" in w)]
            if len(words) >= 3 and words[0] == "deb":
                sources.append(([words[1]], [words[2]]))
    for path in sorted((etc / "sources.list.d").glob("*.sources")):
        for stanza in path.read_text().split("\n\n"):
            fields = {
                key.strip(): value.split()
                for key, _, value in (line.partition(":") for line in stanza.splitlines() if not line.startswith("#"))
            }
            if "deb" in fields.get("Types", []):
                sources.append((fields.get("URIs", []), fields.get("Suites", [])))
    return sources


def debian_mirror(etc: Path = Path("/etc/apt"), os_release: Path = Path("/etc/os-release")) -> str:
    """The mirror this machine's apt takes its own release from (the archive reachable here)."""
    if os.environ.get("RUNTIME_PYTHON_MIRROR"):
        return os.environ["RUNTIME_PYTHON_MIRROR"]
    codename = _os_codename(os_release)
    for uris, suites in _apt_sources(etc):
        if codename in suites and uris:
            return uris[0]
    raise SystemExit(
        f"error: no Debian mirror for '{codename}' in /etc/apt's sources; set RUNTIME_PYTHON_MIRROR to one "
        "(this script needs Debian's package archive)"
    )


class PrivateApt:
    """apt-get on its own sources, lists, downloads and package status under directory: the system's stay as they are."""

    def __init__(self, directory: Path, mirror: str) -> None:
        self.directory = directory
        for sub in ("state/lists/partial", "cache/archives/partial", "sources.list.d", "preferences.d"):
            (directory / sub).mkdir(parents=True, exist_ok=True)
        for empty in ("status", "preferences"):
            (directory / empty).touch()
        (directory / "sources.list").write_text(
            "".join(f"deb [signed-by={KEYRING}] {mirror} {suite} main\n" for suite in SUITES)
        )
        settings = {
            "Dir::Etc::sourcelist": directory / "sources.list",
            "Dir::Etc::sourceparts": directory / "sources.list.d",
            "Dir::Etc::preferences": directory / "preferences",
            "Dir::Etc::preferencesparts": directory / "preferences.d",
            "Dir::State": directory / "state",
            "Dir::State::status": directory / "status",
            "Dir::Cache": directory / "cache",
            "APT::Default-Release": SUITES[0],
            # Downloads land in this checkout, which apt's unprivileged download user may not reach.
            "APT::Sandbox::User": "root",
        }
        (directory / "apt.conf").write_text("".join(f'{key} "{value}";\n' for key, value in settings.items()))

    def run(self, *args: str, capture: bool = False, cwd: Path | None = None) -> str:
        env = {**os.environ, "APT_CONFIG": str(self.directory / "apt.conf"), "DEBIAN_FRONTEND": "noninteractive"}
        done = subprocess.run(["apt-get", *args], env=env, cwd=cwd, check=True, text=True, capture_output=capture)
        return done.stdout if capture else ""

    def closure(self, package: str) -> list[str]:
        """name=version of package and everything it depends on, as an empty system would install them."""
        plan = self.run("install", "--simulate", "--no-install-recommends", package, capture=True)
        found = [line.split()[1:3] for line in plan.splitlines() if line.startswith("Inst ")]
        return [f"{name}={version.strip('(')}" for name, version in found]


def _patchelf() -> str:
    found = shutil.which("patchelf", path=str(Path(sys.executable).parent)) or shutil.which("patchelf")
    if not found:
        raise SystemExit("error: patchelf is missing (a development dependency: run `make venv`)")
    return found


def unpack_interpreter(version: str) -> tuple[Path, str]:
    """Download the interpreter's packages and unpack them into ROOT: the patched interpreter, its package=version."""
    if not Path(KEYRING).is_file():
        raise SystemExit(f"error: {KEYRING} is missing: this script needs Debian's archive and its keys")
    apt = PrivateApt(CACHE / "apt", debian_mirror())
    print(f"Fetching CPython {version} from Debian's archive ({' or '.join(SUITES)}) into {CACHE.relative_to(PROJECT)}")
    apt.run("update", "-qq")
    packages = apt.closure(f"python{version}")
    if not packages:
        raise SystemExit(f"error: Debian's {'/'.join(SUITES)} carries no python{version}")
    debs = CACHE / "apt" / "debs"
    shutil.rmtree(debs, ignore_errors=True)
    debs.mkdir()
    apt.run("download", "-qq", *packages, cwd=debs)
    shutil.rmtree(ROOT, ignore_errors=True)
    for deb in sorted(debs.glob("*.deb")):
        subprocess.run(["dpkg-deb", "--extract", str(deb), str(ROOT)], check=True)
    python = interpreter(version)
    # The multiarch directory (usr/lib/x86_64-linux-gnu, usr/lib/aarch64-linux-gnu) holds libc and the loader.
    libraries = next(p.parent for p in (ROOT / "usr" / "lib").glob("*/libc.so.6"))
    loader = libraries / Path(_patchelf_output("--print-interpreter", python)).name
    # RPATH (not RUNPATH): it also serves the libraries that the standard library's extension modules load.
    subprocess.run(
        [_patchelf(), "--set-interpreter", str(loader), "--force-rpath", "--set-rpath", str(libraries), str(python)],
        check=True,
    )
    python_package = next(p for p in packages if p.startswith(f"python{version}="))
    return python, python_package


def _patchelf_output(option: str, path: Path) -> str:
    return subprocess.run([_patchelf(), option, str(path)], check=True, text=True, capture_output=True).stdout.strip()


def ensure_interpreter(version: str, refresh: bool) -> Path:
    key = {"script": _sha256(Path(__file__)), "version": version, "root": str(ROOT)}
    python = interpreter(version)
    stamp = json.loads(PYTHON_STAMP.read_text()) if PYTHON_STAMP.is_file() else {}
    if refresh or {k: stamp.get(k) for k in key} != key or not python.is_file():
        PYTHON_STAMP.unlink(missing_ok=True)
        python, package = unpack_interpreter(version)
        smoke = subprocess.run([str(python), "-c", SMOKE], check=True, text=True, capture_output=True)
        PYTHON_STAMP.write_text(json.dumps({**key, "package": package, "python": smoke.stdout.strip()}, indent=2))
    return python


def ensure_venv(python: Path, venv: Path) -> None:
    """venv on python with the package and its development dependencies at the versions the development venv has.

    The same versions: a difference between the two runs is then the Python's, not a newer release's. Installed
    again when python or the development venv's versions change.
    """
    uv = str(Path(sys.executable).parent / "uv")
    env = {**os.environ, "UV_PYTHON_DOWNLOADS": "never"}
    freeze = subprocess.run(
        [uv, "pip", "freeze", "--exclude-editable", "--python", sys.executable],
        check=True, env=env, capture_output=True, text=True,
    ).stdout  # fmt: skip
    stamp = venv / ".installed-stamp"
    key = json.dumps({"python": json.loads(PYTHON_STAMP.read_text()), "versions": freeze})
    if stamp.is_file() and stamp.read_text() == key:
        return
    print(f"Installing Interlude and its development tools into {venv.name} on Python {python.name}:")
    subprocess.run([uv, "venv", "--quiet", "--clear", "--seed", "--python", str(python), str(venv)], check=True, env=env)
    constraints = venv / "constraints.txt"
    constraints.write_text(freeze)
    subprocess.run(
        [uv, "pip", "install", "--quiet", "--python", str(venv / "bin" / "python"), "-c", str(constraints),
         "-e", ".[dev]"],
        check=True, env=env, cwd=PROJECT,
    )  # fmt: skip
    stamp.write_text(key)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("venv", nargs="?", type=Path, default=DEFAULT_VENV)
    parser.add_argument("--refresh", action="store_true", help="fetch the archive's newest build again")
    args = parser.parse_args()
    python = ensure_interpreter(runtime_version(), args.refresh)
    ensure_venv(python, args.venv.resolve())
    stamp = json.loads(PYTHON_STAMP.read_text())
    print(f"Runtime Python {stamp['python']} (Debian {stamp['package']}) in {args.venv}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
