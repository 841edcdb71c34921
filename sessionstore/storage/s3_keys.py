"""Listing and deleting below a prefix of a bucket, whatever keys it holds.

obstore parses every key it lists as one of its paths and fails the whole
listing on one it cannot parse (a control character, an empty, `.` or `..`
component: `a//b`, `a/./b`), and it cannot name such a key to delete it. S3
takes any key, and anyone who may write to the bucket can put one, so one
such object below a store's prefix made every listing of it fail: `inspect`,
`prune`, and `rm` of the session that holds it (after its manifest was gone,
so the id stayed taken for good). Listing falls back to boto3 (in the `s3`
extra, imported only then) when obstore fails on a key, and deleting deletes
what obstore cannot name through it. Readers never take such a key for
anything: it is no session id, no record number, and a file of a record
that cannot be read says so.

Folder markers (the zero-byte objects `a/` that the AWS console's "Create
folder", s3fs or rclone make) obstore lists as `a` and deletes as `a`: they
are no file of a record (`real_objects`), and a removal deletes them too
(`delete_markers`), both through boto3, asked only once a zero-byte object
was listed.

A listing is only believed while it stays below the prefix asked and names
each key once (`_Listing`): a server that lists a key outside it (a bug, or
one that ignores the prefix: `s10/...` for `s1`) would have `rm` delete
another session's objects, and one that serves a page again (a continuation
token that does not advance) would page forever, holding every key. Either
is one error line, after the first bad page.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from obstore import exceptions as oe

from sessionstore.errors import StorageError
from sessionstore.storage.s3_config import S3Settings, S3Url, client_error

if TYPE_CHECKING:
    from sessionstore.storage.s3 import S3Storage

__all__ = [
    "addressable",
    "boto3_client",
    "check_addressable",
    "delete",
    "delete_markers",
    "list_below",
    "objects_below",
    "real_objects",
    "remove_prefix",
]


def list_below(storage: S3Storage, below: str, *, delimiter: bool) -> tuple[list[str], list[str]]:
    """(the common prefixes, the object keys) below the bucket key `below` ("" for the
    whole bucket), each a bucket key as listed; without `delimiter`, every key at any
    depth and no prefixes. `StorageError` (one line) if the listing fails."""
    if not delimiter:
        return [], [key for key, _, _ in objects_below(storage, below)]
    import obstore

    store, url, settings = storage._store, storage.url, storage.settings

    try:
        found = obstore.list_with_delimiter(store, below or None)
        prefixes, keys = list(found["common_prefixes"]), [meta["path"] for meta in found["objects"]]
    except oe.InvalidPathError:
        # a key obstore cannot parse: boto3 lists it as it is
        prefixes, objects = _boto3_list(url, settings, below, delimiter=True)
        return prefixes, [key for key, _, _ in objects]
    except Exception as exc:
        raise client_error(exc, _store_key(url, below), url, settings) from None
    for each in (prefixes, keys):
        listing = _Listing(url, settings, below)
        for key in each:
            listing.check(key)
    return prefixes, keys


def objects_below(storage: S3Storage, below: str) -> list[tuple[str, int, str | None]]:
    """(bucket key, size, ETag) of every object at any depth below the bucket key `below`
    ("" for the whole bucket). `StorageError` (one line) if the listing fails."""
    import obstore

    store, url, settings = storage._store, storage.url, storage.settings
    listing = _Listing(url, settings, below)  # checked as it streams: a loop ends soon
    try:
        return [
            (listing.check(meta["path"]), meta["size"], meta["e_tag"])
            # Chunks of 100 (a tenth of a page): a chunk waits for its keys, so a loop of
            # short pages would otherwise go on for hundreds of pages before one is seen.
            for batch in obstore.list(store, below or None, chunk_size=100)
            for meta in batch
        ]
    except StorageError:
        raise
    except oe.InvalidPathError:
        pass  # as in `list_below`
    except Exception as exc:
        raise client_error(exc, _store_key(url, below), url, settings) from None
    return _boto3_list(url, settings, below, delimiter=False)[1]


def delete(storage: S3Storage, keys: list[str], at: str) -> None:
    """Delete the bucket keys `keys` (those absent are fine); `at`: the store key to name in
    an error. Those obstore cannot name go one by one through boto3 (`DeleteObject`: the
    key in the URL, since the XML body of `DeleteObjects` cannot carry a control character)."""
    import obstore

    store, url, settings = storage._store, storage.url, storage.settings
    odd = [key for key in keys if not addressable(key)]
    rest = [key for key in keys if addressable(key)]
    try:
        obstore.delete(store, rest)
    except (ValueError, TypeError):
        odd += rest  # a key it cannot name after all (it raises these before sending)
    except Exception as exc:
        raise client_error(exc, at, url, settings) from None
    if not odd:
        return
    try:
        client = boto3_client(settings)
        for key in odd:
            client.delete_object(Bucket=url.bucket, Key=key)
    except Exception as exc:
        raise _from_boto3(exc, at, url, settings) from None


def real_objects(storage: S3Storage, below: str) -> list[str]:
    """The bucket keys of the objects below the bucket key `below`, folder markers left out
    (`delete_markers`): obstore lists `a/` as `a`, an object no GET finds. boto3 lists the
    keys as they are, asked only when a zero-byte object (as a marker is) was listed."""
    found = objects_below(storage, below)
    if not any(size == 0 for _, size, _ in found):
        return [key for key, _, _ in found]
    raw = {
        key for key, _, _ in _boto3_list(storage.url, storage.settings, below, delimiter=False)[1]
    }
    return [key for key, _, _ in found if key in raw or f"{key}/" not in raw]


def delete_markers(storage: S3Storage, below: str, at: str) -> None:
    """Delete the folder markers at and below the bucket key `below`: the zero-byte objects
    `a/` that the AWS console's "Create folder" (and s3fs, rclone) make. obstore lists
    `a/` as `a` and deletes `a`, so they outlived a delete of every key it listed; boto3
    lists them as they are. `at`: the store key to name in an error."""
    url, settings = storage.url, storage.settings
    _, objects = _boto3_list(url, settings, below, delimiter=False)
    try:
        client = boto3_client(settings)
        for key, _, _ in objects:
            if key.endswith("/"):
                client.delete_object(Bucket=url.bucket, Key=key)
    except Exception as exc:
        raise _from_boto3(exc, at, url, settings) from None


def remove_prefix(storage: S3Storage, prefix: str, *, keep: str | None = None) -> None:
    """Delete the object at the store key `prefix` (a key may be both an object and a
    prefix) and every object below it, the store key `keep` excepted."""
    below = storage.url.key(prefix)
    kept = storage.url.key(keep) if keep is not None else None
    found = objects_below(storage, below)
    delete(storage, [below, *(k for k, _, _ in found if k != kept)], prefix)
    if any(size == 0 for _, size, _ in found):  # maybe a folder marker (`delete_markers`)
        delete_markers(storage, below, prefix)


def addressable(key: str) -> bool:
    """Whether obstore can name `key`: no empty, `.` or `..` component, no ASCII control."""
    return all(part not in ("", ".", "..") for part in key.split("/")) and not any(
        ord(c) < 0x20 or ord(c) == 0x7F for c in key
    )


def check_addressable(storage: S3Storage, key: str) -> None:
    """`StorageError` (one line naming the bucket, as obstore's refusal of a control
    character is said) unless obstore can name the store's `key`: a listed key may be
    `a//b` or `../x`, which `check_key` would refuse as a caller's mistake, naming no
    bucket, and which a reader must never take as a path (`export`)."""
    if not addressable(key):
        raise client_error(ValueError("unaddressable"), key, storage.url, storage.settings)


def boto3_client(settings: S3Settings) -> Any:
    """A boto3 client of the bucket's server, built from `settings` only."""
    import boto3
    from botocore.config import Config

    return boto3.client(
        "s3",
        endpoint_url=settings.endpoint,
        region_name=settings.region,
        aws_access_key_id=settings.access_key_id,
        aws_secret_access_key=settings.secret_access_key,
        aws_session_token=settings.session_token,
        config=Config(retries={"max_attempts": 3}, connect_timeout=5, read_timeout=60),
    )


def _boto3_list(
    url: S3Url, settings: S3Settings, below: str, *, delimiter: bool
) -> tuple[list[str], list[tuple[str, int, str | None]]]:
    prefixes: list[str] = []
    objects: list[tuple[str, int, str | None]] = []
    asked: dict[str, str] = {"Bucket": url.bucket, "Prefix": f"{below}/" if below else ""}
    if delimiter:
        asked["Delimiter"] = "/"
    listing = _Listing(url, settings, below)
    try:
        pages = boto3_client(settings).get_paginator("list_objects_v2")
        for page in pages.paginate(**asked):
            prefixes += [
                listing.check(p["Prefix"]).rstrip("/") for p in page.get("CommonPrefixes", [])
            ]
            objects += [
                (listing.check(i["Key"]), i["Size"], i.get("ETag"))
                for i in page.get("Contents", [])
            ]
    except StorageError:
        raise
    except Exception as exc:
        raise _from_boto3(exc, _store_key(url, below), url, settings) from None
    return prefixes, objects


class _Listing:
    """The keys of one listing below the bucket key `below` seen so far (module docstring)."""

    def __init__(self, url: S3Url, settings: S3Settings, below: str) -> None:
        self.url, self.settings, self.below = url, settings, below
        self.seen: dict[str, int] = {}

    def check(self, key: str) -> str:
        """`key`, if it is below the prefix (or it, as obstore lists a folder marker) and
        not seen twice already (obstore lists `a` and the marker `a/` both as `a`); else
        `StorageError` (one line naming the prefix, not the key)."""
        below = self.below
        if below and key != below and not key.startswith(f"{below}/"):
            problem = "holds a key outside the prefix asked for"
        elif self.seen.get(key, 0) >= 2:
            problem = "names a key again and again (a page served again: it might never end)"
        else:
            self.seen[key] = self.seen.get(key, 0) + 1
            return key
        where = f"{below or '/'} in bucket {self.url.bucket!r} at {self.settings.where}"
        raise StorageError(
            _store_key(self.url, below),
            self.settings.scrub(f"the server's listing of {where} {problem}; not believed"),
        )


def _from_boto3(exc: Exception, key: str, url: S3Url, settings: S3Settings) -> StorageError:
    """One line for what boto3 raised, as `client_error` says it of obstore's: the HTTP
    status and the S3 error code only (boto3's own text may quote the server's reply)."""
    if isinstance(exc, ImportError):
        problem = "boto3 is needed for a key obstore cannot address: pip install 'sessionstore[s3]'"
        return StorageError(key, problem)
    response = getattr(exc, "response", None)
    if not isinstance(response, dict):
        return client_error(OSError("error sending request"), key, url, settings)
    status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return _boto3_error(response.get("Error", {}).get("Code"), status, key, url, settings)


def _boto3_error(
    code: object, status: object, key: str, url: S3Url, settings: S3Settings
) -> StorageError:
    text = f"status code: {status}" if isinstance(status, int) else ""
    if isinstance(code, str) and code.isalnum():
        text += f" <Code>{code}</Code>"
    return client_error(RuntimeError(text or "failed"), key, url, settings)


def _store_key(url: S3Url, bucket_key: str) -> str:
    """The store's key of the bucket key `bucket_key` (as errors name it)."""
    return bucket_key[len(url.prefix) + 1 :] if url.prefix else bucket_key
