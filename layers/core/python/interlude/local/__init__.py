"""The local stack: moto in-process, the real handlers behind a loopback HTTP server, and pumps playing AWS."""

# The fake account and region every local stand-in reports (moto accepts any; these are its defaults).
LOCAL_ACCOUNT = "123456789012"
LOCAL_REGION = "us-east-1"
