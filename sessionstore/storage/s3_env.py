"""What obstore reads of the environment on its own, checked as the store's own settings.

obstore's `S3Store` starts from object_store's `AmazonS3Builder::from_env`:
every `AWS_*` variable naming one of its settings is read, then the
configuration given is applied over it. So what decides where requests go is
always given (`pinned`), and what obstore reads beyond the AWS CLI's variables
passes the checks the store makes of its own:

- `AWS_ENDPOINT` and `AWS_TOKEN`, obstore's aliases of `AWS_ENDPOINT_URL` and
  `AWS_SESSION_TOKEN`, are read as the last choice of each (`S3Settings.from_env`):
  an endpoint set there is checked and named in messages, a token checked and
  scrubbed, as any other;
- without a key pair the client asks a credential provider: the endpoints of those
  (`AWS_METADATA_ENDPOINT`, `AWS_CONTAINER_CREDENTIALS_*`, `AWS_ENDPOINT_URL_STS`)
  are checked as the store's endpoint is (the client panics on a malformed one too);
- the bucket is always addressed in the path of the endpoint (AWS's own of the
  region when none is set, so the region must be a host name's letters, digits
  and '-'): with `AWS_VIRTUAL_HOSTED_STYLE_REQUEST` or `AWS_S3_EXPRESS` the client
  would send to the endpoint as if it were the bucket's own host, so to whatever
  bucket the server reads from the key, not the one the URL names.

Client options (`AWS_PROXY_URL`, `AWS_ALLOW_INVALID_CERTIFICATES`...) need nothing:
`s3_config.open_bucket` gives its own, which replace those the client read.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from sessionstore.errors import InvalidInput

__all__ = [
    "ENDPOINTS",
    "TOKENS",
    "check_credential_endpoints",
    "check_endpoint",
    "check_region",
    "pinned",
]

# Where an endpoint is read, first first (`AWS_ENDPOINT`: obstore's alias, after the
# profile's `endpoint_url`, as the client would then read it), and a session token.
ENDPOINTS = ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "AWS_ENDPOINT")
TOKENS = ("AWS_SESSION_TOKEN", "AWS_TOKEN")
# The credential providers' endpoints the client reads when it has no key pair.
_CREDENTIAL_ENDPOINTS = (
    "AWS_METADATA_ENDPOINT",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    "AWS_ENDPOINT_URL_STS",
)
_TASK_URI = "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"  # a path of http://169.254.170.2
_REGION = re.compile(r"[A-Za-z0-9-]{1,64}")


def pinned(endpoint: str | None, region: str) -> dict[str, Any]:
    """The client's configuration of where requests go: no variable it reads can change it.

    `InvalidInput` for a region that cannot be part of AWS's host name (when
    `endpoint` is None, the requests go to `https://s3.REGION.amazonaws.com`).
    """
    if endpoint is None:
        check_region(region, "region")
    at = endpoint or f"https://s3.{region}.amazonaws.com"
    return {
        "endpoint": at,
        "aws_endpoint_url_s3": at,  # read before `endpoint` by the client
        "virtual_hosted_style_request": False,
        "s3_express": False,
        "conditional_put": "etag",
    }


def check_region(region: str, source: str) -> None:
    """`InvalidInput` naming `source` unless `region` can be a label of a host name."""
    if not _REGION.fullmatch(region):
        raise InvalidInput(
            source, "a region is letters, digits and '-' (such as us-east-1) without an endpoint"
        )


def check_credential_endpoints(env: Mapping[str, str]) -> None:
    """`InvalidInput` naming the variable if an endpoint the client would ask for credentials
    (having no key pair) is not one it can send to."""
    for name in _CREDENTIAL_ENDPOINTS:
        value = env.get(name)
        if value is not None:
            check_endpoint(value, name)
    path = env.get(_TASK_URI)
    if path is not None:
        if not path.startswith("/"):
            raise InvalidInput(_TASK_URI, "must be a path starting with '/'")
        check_endpoint(f"http://169.254.170.2{path}", _TASK_URI)


def check_endpoint(endpoint: str, source: str) -> None:
    """`InvalidInput` naming `source` (where the endpoint was set) unless `endpoint` is an
    `http(s)://HOST[:PORT][/PATH]` URL the client can send to.

    The client does not refuse a malformed endpoint: it panics on the first
    request (a Rust backtrace and a traceback instead of a line), so it is
    checked here, before any client is made. The value is never shown: a
    malformed one may hold a credential that `S3Settings.where` cannot find.
    """
    if endpoint == "":  # read as unset by the AWS CLI, as an endpoint by the client
        raise InvalidInput(source, "is set but empty: unset it, or give http(s)://HOST")
    problem = _endpoint_problem(endpoint)
    if problem is not None:
        raise InvalidInput(source, f"the endpoint {problem}")


# A host as the client's URI parser takes it (a name or IPv4 address, or an IPv6 in brackets)
# and the path of RFC 3986's characters (others, such as '<', make it panic too).
_AUTHORITY = re.compile(r"([A-Za-z0-9._~-]+|\[[0-9A-Fa-f:.]+\])(?::[0-9]*)?")
_PATH = re.compile(r"[A-Za-z0-9._~!$&'()*+,;=:@%/-]*")


def _endpoint_problem(endpoint: str) -> str | None:
    import urllib.parse  # here: a local store imports this module, never these

    if any(c.isspace() or ord(c) < 0x20 or ord(c) == 0x7F for c in endpoint):
        return "holds a space or a control character"
    if not endpoint.isascii():
        return "holds a character that is not ASCII"
    try:
        parts = urllib.parse.urlsplit(endpoint)
        parts.port  # noqa: B018 (urllib checks the port when it is read)
    except ValueError as exc:
        return "has no valid host" if "IPv6" in str(exc) else "has a port not from 0 to 65535"
    if parts.scheme.lower() not in ("http", "https"):
        return "must start with http:// or https://"
    authority = _AUTHORITY.fullmatch(parts.netloc.rpartition("@")[2])
    if authority is None or not _valid_ip6(authority.group(1)):
        return "has no valid host (http://HOST[:PORT])"
    if "?" in endpoint or "#" in endpoint:  # an empty one too: urlsplit gives "" for both
        return "must not have a query or a fragment"
    if not _PATH.fullmatch(parts.path):
        return "has a path with a character a URL must not hold unescaped"
    return None


def _valid_ip6(host: str) -> bool:
    import ipaddress

    if not host.startswith("["):
        return True
    try:
        ipaddress.IPv6Address(host[1:-1])
    except ValueError:
        return False
    return True
