"""The local stack: moto in-process, the real handlers behind a loopback HTTP server, and pumps playing AWS."""
