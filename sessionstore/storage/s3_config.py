"""`s3://BUCKET/PREFIX` stores: the URL, the ecosystem's configuration, and its errors.

The URL is checked here, before anything is sent: a bucket name by S3's
rules, a prefix of valid key components (`storage.base.check_key`). The
connection is configured the AWS way and nothing else: `AWS_ENDPOINT_URL_S3`
or `AWS_ENDPOINT_URL`, `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`,
`AWS_SESSION_TOKEN`, `AWS_REGION` or `AWS_DEFAULT_REGION`, and `AWS_PROFILE`
naming a profile of the shared files (`AWS_SHARED_CREDENTIALS_FILE`, else
`~/.aws/credentials`; `AWS_CONFIG_FILE`, else `~/.aws/config`). A variable
wins over a file, as in the AWS CLI. An `http://` endpoint is allowed as it
is (a local server needs no switch). What obstore reads of the environment
beyond these is `s3_env`'s.

Every failure the client reports becomes one `StorageError` line naming the
endpoint, the bucket and the key, with the S3 error code when the server
sent one; never the client's own text, which can carry the server's reply
(a `SignatureDoesNotMatch` body echoes the access key id), and never a
credential: `S3Settings.scrub` removes any credential value a message could
still hold.

obstore is imported only when a store is opened, so a local store never
loads it (nor does parsing a URL).
"""

from __future__ import annotations

import configparser
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from sessionstore._fs.read import read_named
from sessionstore.errors import InvalidInput, StorageError, Unavailable
from sessionstore.storage.base import check_key
from sessionstore.storage.s3_env import (
    ENDPOINTS,
    TOKENS,
    check_credential_endpoints,
    check_endpoint,
    check_region,
    pinned,
)
from sessionstore.storage.s3_path import S3Path

if TYPE_CHECKING:
    from obstore.store import S3Store

__all__ = [
    "S3Settings",
    "S3Url",
    "client_error",
    "is_s3_url",
    "open_bucket",
    "parse_s3_url",
]

SCHEME = "s3://"
DEFAULT_REGION = "us-east-1"
# An AWS config or credentials file holds a few lines a profile: one past this is not one.
AWS_FILE_MAX = 4 << 20

# S3's rules for a bucket name (general purpose buckets): 3-63 characters of lowercase
# letters, digits, '.' and '-', starting and ending with a letter or digit.
_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
_IPV4 = re.compile(r"\d+\.\d+\.\d+\.\d+")
# The user info of a URL (`scheme://USER:PASSWORD@`), up to the host's last '@'.
_USERINFO = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://)[^/?#]*@")


@dataclass(frozen=True)
class S3Url:
    """A store in a bucket: `s3://BUCKET/PREFIX` (the prefix "" is the bucket's top)."""

    bucket: str
    prefix: str

    def __str__(self) -> str:
        return f"{SCHEME}{self.bucket}/{self.prefix}" if self.prefix else f"{SCHEME}{self.bucket}"

    def key(self, key: str) -> str:
        """The bucket key of the store's `key` (the prefix before it)."""
        return f"{self.prefix}/{key}" if self.prefix else key

    def path(self) -> S3Path:
        """The store as an `S3Path` (`str()` of it is this URL)."""
        return S3Path(f"/{self.bucket}/{self.prefix}" if self.prefix else f"/{self.bucket}")


def is_s3_url(text: str | os.PathLike[str]) -> bool:
    """Whether `text` names an object store (`s3://...`) rather than a local directory."""
    return isinstance(text, str) and text[:5].lower() == SCHEME


def parse_s3_url(text: str) -> S3Url:
    """The bucket and prefix of `s3://BUCKET/PREFIX`; `InvalidInput` naming what is wrong.

    A trailing '/' is allowed (`s3://b/p/` is `s3://b/p`); credentials,
    a port, a query or a fragment in the URL are refused, since the
    configuration is the AWS variables' (and a secret in a URL leaks into
    every message that names the store).
    """
    if not is_s3_url(text):
        raise InvalidInput("store URL", f"{text!r} must start with {SCHEME}")
    rest = text[len(SCHEME) :]
    bucket, _, prefix = rest.partition("/")
    if "@" in bucket:
        # Never echo it: the part before '@' would be a credential.
        raise InvalidInput(
            "store URL", "must not hold credentials; set AWS_ACCESS_KEY_ID and friends"
        )
    shown = f"{SCHEME}{bucket}"
    if any(c in text for c in "?#") or any(ord(c) < 0x20 or ord(c) == 0x7F for c in text):
        raise InvalidInput(shown, "must be s3://BUCKET/PREFIX, without a query or fragment")
    if not _BUCKET.fullmatch(bucket) or ".." in bucket or _IPV4.fullmatch(bucket):
        raise InvalidInput(
            shown,
            f"bucket '{bucket}' is not a valid S3 bucket name "
            "(3-63 lowercase letters, digits, '.' or '-', starting and ending with a letter "
            "or digit)",
        )
    prefix = prefix.rstrip("/") if prefix.endswith("/") and prefix.strip("/") else prefix
    if prefix:
        check_key(prefix, f"prefix of {shown}")
    return S3Url(bucket, prefix)


# A credential this short (a local server's "test", say) is also a piece of ordinary
# words: masked everywhere, it turned `bucket 'x' does not exist` into `buck***...`.
SHORT_CREDENTIAL = 8


def _alone(secret: str) -> re.Pattern[str]:
    """`secret` where it stands alone, as a word or a key's component: next to no letter,
    digit or `+=_.~-`, so `t` is found in `runs/t/x` and `key t here`, never in
    `bucket 't1' does not exist`."""
    around = r"A-Za-z0-9+=_.~-"
    return re.compile(rf"(?<![{around}]){re.escape(secret)}(?![{around}])")


@dataclass(frozen=True)
class S3Settings:
    """Where and as whom to connect; credential fields never appear in `repr`."""

    endpoint: str | None
    region: str
    access_key_id: str | None = field(default=None, repr=False)
    secret_access_key: str | None = field(default=None, repr=False)
    session_token: str | None = field(default=None, repr=False)

    def __repr__(self) -> str:
        # Not the dataclass's: the endpoint's user info (a proxy's password) is a secret too.
        endpoint = self.where if self.endpoint else None
        return f"S3Settings(endpoint={endpoint!r}, region={self.region!r})"

    @property
    def where(self) -> str:
        """The endpoint as messages name it: a `USER:PASSWORD@` in it (a proxy's basic
        auth) shown as `***@`."""
        if not self.endpoint:
            return f"AWS S3 ({self.region})"
        return _USERINFO.sub(r"\1***@", self.endpoint)

    def scrub(self, text: str) -> str:
        """`text` with every credential value in it (the endpoint's user info too)
        replaced by `***`; one under `SHORT_CREDENTIAL` characters only where it stands
        alone (`_alone`)."""
        if self.endpoint and self.endpoint != self.where:
            text = text.replace(self.endpoint, self.where)
        for secret in (self.secret_access_key, self.session_token, self.access_key_id):
            if secret and len(secret) >= SHORT_CREDENTIAL:
                text = text.replace(secret, "***")
            elif secret:
                text = _alone(secret).sub("***", text)
        return text

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> S3Settings:
        """The settings of the AWS variables, then of the `AWS_PROFILE` profile's files."""
        env = os.environ if environ is None else environ
        profile = _profile(env)

        def pick(variable: str, *names: str) -> str | None:
            value = env.get(variable) or next((profile[n] for n in names if profile.get(n)), None)
            return value or None

        key_id = pick("AWS_ACCESS_KEY_ID", "aws_access_key_id")
        secret = pick("AWS_SECRET_ACCESS_KEY", "aws_secret_access_key")
        token_from = next((name for name in TOKENS if env.get(name)), "AWS_SESSION_TOKEN")
        token = env.get(token_from) or profile.get("aws_session_token") or None
        if env.get("AWS_ACCESS_KEY_ID") and not env.get(token_from):
            token = None  # a token of the profile belongs to the profile's keys, not these
        endpoint = _endpoint(env, profile)
        region = env.get("AWS_REGION") or pick("AWS_DEFAULT_REGION", "region") or DEFAULT_REGION
        region_from = "AWS_REGION" if env.get("AWS_REGION") else "AWS_DEFAULT_REGION"
        # Each goes into a request header, where a control character makes the client
        # panic (a Rust backtrace and a traceback): said here, naming it, never showing it.
        for value, name in (
            (region, region_from),
            (key_id, "AWS_ACCESS_KEY_ID"),
            (token, token_from),
        ):
            if value and not (value.isascii() and value.isprintable()):
                raise InvalidInput(name, "holds a control character or one that is not ASCII")
        if endpoint is None:
            check_region(region, region_from)  # in the host name of AWS's endpoint
        if not (key_id and secret):
            check_credential_endpoints(env)  # the client asks a credential provider
        elif token is None and (empty := next((n for n in TOKENS if env.get(n) == ""), None)):
            # Read as unset here and by the AWS CLI, but sent by the client as the token.
            raise InvalidInput(empty, "is set but empty (the client would send it): unset it")
        return cls(endpoint, region, key_id, secret, token)


# Where an endpoint may come from, in the order `_endpoint` takes the first one set.
_SET_BY = "AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, the profile's endpoint_url or AWS_ENDPOINT"


def _endpoint(env: Mapping[str, str], profile: Mapping[str, str]) -> str | None:
    """The endpoint of the variables or the profile, checked (`check_endpoint`), naming
    where it was set; None: AWS's own."""
    for empty in ENDPOINTS:
        if env.get(empty) == "":  # read as unset here, as an endpoint by the client: panics
            check_endpoint("", empty)
    named = [(env.get(n), n) for n in ENDPOINTS[:2]]
    where = f"endpoint_url of AWS profile '{env.get('AWS_PROFILE') or 'default'}'"
    named += [(profile.get("endpoint_url"), where), (env.get(ENDPOINTS[2]), ENDPOINTS[2])]
    endpoint, source = next(((value, n) for value, n in named if value), (None, ""))
    if endpoint is not None:
        check_endpoint(endpoint, source)
    return endpoint


def _profile(env: Mapping[str, str]) -> dict[str, str]:
    """The values of the profile `AWS_PROFILE` (else `default`) in the shared files.

    The credentials file's section is `[NAME]`, the config file's
    `[profile NAME]` (`[default]` for the default); credentials win. A file
    that is missing, cannot be read or does not parse gives nothing (as for
    the AWS CLI without a profile), and so does one that is not a regular
    file or is larger than `AWS_FILE_MAX` (`read_named`: a FIFO is never waited
    on, `/dev/zero` never read without end); a profile named but found nowhere
    is an error.
    """
    name = env.get("AWS_PROFILE") or "default"
    home = Path(env.get("HOME") or Path.home())
    files = [
        (Path(env.get("AWS_CONFIG_FILE") or home / ".aws" / "config"), f"profile {name}"),
        (Path(env.get("AWS_SHARED_CREDENTIALS_FILE") or home / ".aws" / "credentials"), name),
    ]
    found: dict[str, str] = {}
    seen = False
    for path, section in files:
        parser = configparser.ConfigParser(interpolation=None)
        try:
            data = read_named(str(path), AWS_FILE_MAX)
            if data is None:
                continue
            parser.read_string(data.decode(), source=str(path))
        except (configparser.Error, InvalidInput, UnicodeDecodeError):
            continue
        for candidate in (section, name) if name == "default" else (section,):
            if parser.has_section(candidate):
                seen = True
                found.update(parser.items(candidate))
    if env.get("AWS_PROFILE") and not seen:
        raise InvalidInput("AWS_PROFILE", f"profile '{name}' is in neither AWS file")
    return found


def open_bucket(url: S3Url, settings: S3Settings, *, retries: int = 3) -> S3Store:
    """An obstore `S3Store` of the bucket (keys are the bucket's own; `url.key` adds the
    prefix). `retries` 0 is for conditional writes, whose retries the caller decides."""
    from obstore.store import S3Store

    if settings.endpoint:
        check_endpoint(settings.endpoint, "endpoint")  # settings made without `from_env`
    config = {"region": settings.region, **pinned(settings.endpoint or None, settings.region)}
    if settings.access_key_id and settings.secret_access_key:
        config["access_key_id"] = settings.access_key_id
        config["secret_access_key"] = settings.secret_access_key
        if settings.session_token:
            config["session_token"] = settings.session_token
        elif stray := next((name for name in TOKENS if name in os.environ), None):
            # Settings made without `from_env`: the client would sign with it beside them.
            raise InvalidInput(stray, "is set, but the store's keys have no token: unset it")
    # Explicit settings only: `S3Store` also reads AWS_* variables, but none it would read
    # may change what `S3Settings` decided (`s3_env`).
    from obstore.exceptions import BaseError

    try:
        return S3Store(
            url.bucket,
            config=config,  # type: ignore[arg-type]
            client_options={
                "allow_http": True,
                "connect_timeout": timedelta(seconds=5),
                "timeout": timedelta(seconds=60),
            },
            retry_config={
                "max_retries": retries,
                "backoff": {
                    "init_backoff": timedelta(milliseconds=50),
                    "max_backoff": timedelta(seconds=2),
                },
                "retry_timeout": timedelta(seconds=30),
            },
        )
    except BaseError as exc:  # an AWS_* variable the client reads itself holds a bad value
        problem = f"the AWS_* variables do not configure a client: {_first_line(exc)}"
        raise StorageError("", settings.scrub(problem)) from None


def _first_line(exc: Exception) -> str:
    """obstore's message without the "Debug source:" block it appends, over lines."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


_CODE = re.compile(r"<Code>([A-Za-z0-9.]{1,64})</Code>")
STATUS = re.compile(r"status code: (\d{3})")  # the HTTP status in a client error


def client_error(exc: Exception, key: str, url: S3Url, settings: S3Settings) -> StorageError:
    """One line for a failure the client raised on `key` of the store at `url`.

    Names the endpoint, the bucket and the key; says what to check. Built
    from the exception's class, the HTTP status and the S3 error code only.
    """
    from obstore import exceptions as oe

    text = str(exc)
    code_match = _CODE.search(text)
    code = code_match.group(1) if code_match else None
    status = STATUS.search(text)
    where = f"{url.key(key)} in bucket {url.bucket!r} at {settings.where}"
    if code == "NoSuchBucket":
        problem = f"bucket {url.bucket!r} does not exist at {settings.where}"
    elif isinstance(exc, oe.PermissionDeniedError | oe.UnauthenticatedError) or code in _AUTH:
        problem = (
            f"{where}: access denied ({code or 'forbidden'}); check the credentials "
            "(AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_PROFILE) and their permissions"
        )
    elif isinstance(exc, ValueError) and status is None:
        # obstore parses a key before it sends anything: S3 took this one, obstore cannot.
        problem = (
            f"{where}: a key obstore cannot address (a control character, or an empty, "
            "'.' or '..' component); nothing was sent"
        )
    elif status is None and ("error sending request" in text or "connect" in text.lower()):
        problem = f"cannot reach {settings.where} (for {where}); check the endpoint ({_SET_BY})"
        return Unavailable(key, settings.scrub(problem))
    else:
        detail = code or (f"HTTP {status.group(1)}" if status else type(exc).__name__)
        problem = f"{where}: request failed ({detail})"
        if status is None or int(status.group(1)) >= 500:
            return Unavailable(key, settings.scrub(problem))
    return StorageError(key, settings.scrub(problem))


_AUTH = frozenset(
    ("AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken", "InvalidToken")
)
