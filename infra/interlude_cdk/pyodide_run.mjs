// Runs Python code inside pyodide (CPython compiled to WebAssembly) with a host directory mounted at /mnt, and
// prints the value of the code's last expression (a JSON string) on stdout. Python's own output goes to stderr.
// Usage: node pyodide_run.mjs <pyodide package dir> <host dir> <python code>
// Called by bytecode.py: the layers' bytecode must come from the Lambda runtime's Python version.
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [pyodideDir, hostDir, code] = process.argv.slice(2);
const { loadPyodide } = await import(pathToFileURL(join(pyodideDir, "pyodide.mjs")).href);
const toStderr = (line) => process.stderr.write(line + "\n");
const py = await loadPyodide({ indexURL: pyodideDir + "/", stdout: toStderr, stderr: toStderr });
py.FS.mkdir("/mnt");
py.FS.mount(py.FS.filesystems.NODEFS, { root: hostDir }, "/mnt");
try {
  process.stdout.write(String(py.runPython(code)) + "\n");
} catch (error) {
  process.stderr.write(String(error.message ?? error) + "\n");
  process.exit(1);
}
