"""Interlude: durable human-in-the-loop gates for workflow runs."""

# The one place the release is named (semantic versioning; CHANGELOG.md has an entry for each): the package's version
# (pyproject reads it), discovery's implementation.version and `interlude --version`.
__version__ = "0.12.0"
