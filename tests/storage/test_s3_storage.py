"""S3Storage against real servers on loopback: the seam's laws, shared with LocalStorage,
and what only an object store has (claim objects, the probe, the prefix, errors)."""

from __future__ import annotations

from pathlib import Path

import pytest
from s3_servers import S3Server

from sessionstore.errors import InvalidInput, StorageError, TooLarge
from sessionstore.storage.base import Storage
from sessionstore.storage.local import LocalStorage
from sessionstore.storage.s3 import CLAIM, S3Storage
from sessionstore.storage.s3_config import S3Settings, S3Url, parse_s3_url


def s3_storage(server: S3Server, prefix: str = "store") -> S3Storage:
    url = S3Url(server.new_bucket(), prefix)
    return S3Storage(url, S3Settings.from_env(server.env()))


@pytest.fixture(params=["local", "s3"])
def storage(request: pytest.FixtureRequest, tmp_path: Path) -> Storage:
    if request.param == "local":
        return LocalStorage(tmp_path / "root")
    return s3_storage(request.getfixturevalue("moto_s3"))


def names(storage: Storage, prefix: str) -> dict[str, bool]:
    return {item.name: item.is_prefix for item in storage.list(prefix)}


# -- laws every backend keeps ----------------------------------------------------------


def test_put_get_round_trip(storage: Storage) -> None:
    storage.put("s/trials/1/task.yml", b"model: x\n")
    assert storage.get("s/trials/1/task.yml", 100) == b"model: x\n"
    storage.put("s/trials/1/task.yml", b"model: y\n")
    assert storage.get("s/trials/1/task.yml", 100) == b"model: y\n"


def test_create_writes_once(storage: Storage) -> None:
    assert storage.create("s/report.json", b"{}") is True
    assert storage.create("s/report.json", b'{"x": 1}') is False
    assert storage.create("s/report.json", b"{}") is False  # even the same bytes
    assert storage.get("s/report.json", 10) == b"{}"


def test_absent_is_an_answer(storage: Storage) -> None:
    assert storage.get("nothing/here", 10) is None
    assert list(storage.list("nothing")) == []
    storage.remove_tree("nothing")
    assert storage.get_each("nothing", ["1", "2"], "trial.json", 10) == [None, None]


def test_list_names_objects_and_prefixes(storage: Storage) -> None:
    storage.put("s/a", b"1")
    storage.put("s/d/b", b"2")
    assert names(storage, "s") == {"a": False, "d": True}
    assert names(storage, "") == {"s": True}


def test_get_is_bounded(storage: Storage) -> None:
    storage.put("s/big", b"x" * 100)
    assert storage.get("s/big", 100) == b"x" * 100
    with pytest.raises(TooLarge) as info:
        storage.get("s/big", 99)
    assert info.value.key == "s/big"
    with pytest.raises(TooLarge):
        storage.get("s/big", 0)  # how `files.exists` asks: nothing read
    storage.put("s/empty", b"")
    assert storage.get("s/empty", 0) == b""
    assert storage.get("s/none", 0) is None


def test_claim_is_taken_once_and_not_listed_as_a_file(storage: Storage) -> None:
    assert storage.claim("s/trials/1") is True
    assert storage.claim("s/trials/1") is False
    assert names(storage, "s/trials") == {"1": True}
    assert names(storage, "s/trials/1") == {}


def test_a_prefix_holding_objects_cannot_be_claimed(storage: Storage) -> None:
    storage.put("s/trials/3/task.yml", b"x")  # a record made without a claim
    assert storage.claim("s/trials/3") is False
    assert storage.claim("s/trials/4") is True


def test_get_each_answers_in_order(storage: Storage) -> None:
    for n in range(1, 21):
        storage.put(f"s/trials/{n}/trial.json", str(n).encode())
    storage.put("s/trials/7/trial.json", b"x" * 50)
    wanted = [str(n) for n in range(1, 23)]
    got = storage.get_each("s/trials", wanted, "trial.json", 10)
    assert len(got) == 22
    assert isinstance(got[6], TooLarge)
    assert got[21] is None and got[20] is None
    assert [g for i, g in enumerate(got[:20]) if i != 6] == [
        str(n).encode() for n in range(1, 21) if n != 7
    ]


def test_remove_tree_removes_everything_below(storage: Storage) -> None:
    storage.put("s/a", b"1")
    storage.put("s/d/e/f", b"2")
    storage.claim("s/trials/1")
    storage.put("sibling/a", b"3")
    storage.remove_tree("s")
    assert storage.get("s/a", 10) is None
    assert names(storage, "") == {"sibling": True}


@pytest.mark.parametrize("key", ["", "/a", "a/", "a//b", "a/../b", "./a", "a\0b"])
def test_invalid_keys_are_refused(storage: Storage, key: str) -> None:
    with pytest.raises(InvalidInput):
        storage.put(key, b"")
    with pytest.raises(InvalidInput):
        storage.get(key, 1)


# -- object storage only -----------------------------------------------------------------


def test_every_key_is_below_the_stores_prefix(moto_s3: S3Server) -> None:
    store = s3_storage(moto_s3, "team/runs")
    store.put("s/a", b"1")
    assert store.claim("s/trials/1")
    assert store.create("s/trials/1/trial.json", b"{}")
    assert moto_s3.keys(store.url.bucket) == [
        "team/runs/s/a",
        f"team/runs/s/trials/1/{CLAIM}",
        "team/runs/s/trials/1/trial.json",
    ]
    assert store.keys_below("s") == ["s/a", f"s/trials/1/{CLAIM}", "s/trials/1/trial.json"]


def test_the_claim_says_who_took_it(moto_s3: S3Server) -> None:
    import json
    import os

    store = s3_storage(moto_s3)
    store.claim("s/trials/1")
    claim = json.loads(store.get(f"s/trials/1/{CLAIM}", 1000) or b"")
    assert claim["pid"] == os.getpid()
    assert len(claim["token"]) == 32 and claim["host"]


def test_probe_tells_a_server_that_ignores_conditions(
    weed_s3: S3Server, rclone_s3: S3Server
) -> None:
    for server, enforced in ((weed_s3, True), (rclone_s3, False)):
        store = s3_storage(server)
        assert (store.probe_conditional() == "") is enforced
        assert server.keys(store.url.bucket) == []  # the probe cleans up


def test_a_missing_bucket_is_one_clear_error(moto_s3: S3Server) -> None:
    store = S3Storage(S3Url("no-such-bucket-here", "p"), S3Settings.from_env(moto_s3.env()))
    with pytest.raises(StorageError, match="bucket 'no-such-bucket-here' does not exist at http"):
        store.get("s/session.json", 10)
    with pytest.raises(StorageError, match="does not exist"):
        store.probe_conditional()


@pytest.mark.parametrize("variable", ["AWS_SESSION_TOKEN", "AWS_TOKEN"])
def test_a_token_of_the_environment_never_joins_explicit_keys(
    moto_s3: S3Server, monkeypatch: pytest.MonkeyPatch, variable: str
) -> None:
    # obstore reads it itself: explicit settings without a token were sent with this one.
    monkeypatch.setenv(variable, "token-of-another-identity")
    settings = S3Settings(moto_s3.endpoint, "us-east-1", moto_s3.access_key, moto_s3.secret_key)
    with pytest.raises(InvalidInput, match=f"^{variable}: is set, but the store's keys have no"):
        S3Storage(S3Url(moto_s3.new_bucket(), "p"), settings)


def test_bad_credentials_never_reach_the_message(weed_s3: S3Server) -> None:
    bucket = weed_s3.new_bucket()
    settings = S3Settings.from_env(weed_s3.env(AWS_SECRET_ACCESS_KEY="wrong-secret-value"))
    store = S3Storage(S3Url(bucket, ""), settings)
    with pytest.raises(StorageError) as info:
        store.get("a", 10)
    text = str(info.value)
    assert "access denied" in text and weed_s3.endpoint in text
    assert "wrong-secret-value" not in text and weed_s3.access_key not in text.replace("***", "")
    assert "\n" not in text


@pytest.mark.parametrize(
    ("url", "bucket", "prefix"),
    [
        ("s3://bucket", "bucket", ""),
        ("s3://bucket/", "bucket", ""),
        ("s3://my.bucket-1/a/b", "my.bucket-1", "a/b"),
        ("s3://bucket/a/b/", "bucket", "a/b"),
    ],
)
def test_urls_parse(url: str, bucket: str, prefix: str) -> None:
    assert parse_s3_url(url) == S3Url(bucket, prefix)


@pytest.mark.parametrize(
    "url",
    [
        "s3://",
        "s3://ab",
        "s3://Bucket",
        "s3://-bucket",
        "s3://bucket-",
        "s3://a..b",
        "s3://192.168.1.1",
        "s3://bucket/a//b",
        "s3://bucket/../x",
        "s3://bucket/a?x=1",
        "s3://bucket/a\nb",
        "s3://key:secret@bucket/p",
        "file:///tmp",
    ],
)
def test_bad_urls_are_refused_precisely(url: str) -> None:
    with pytest.raises(InvalidInput) as info:
        parse_s3_url(url)
    assert "secret" not in str(info.value)
    assert "\n" not in str(info.value)


def test_settings_come_from_the_variables_then_the_profile(tmp_path: Path) -> None:
    (tmp_path / "credentials").write_text(
        "[work]\naws_access_key_id = FILEKEY\naws_secret_access_key = FILESECRET\n"
    )
    (tmp_path / "config").write_text(
        "[profile work]\nregion = eu-west-3\nendpoint_url = http://127.0.0.1:9\n"
    )
    files = {
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "credentials"),
        "AWS_CONFIG_FILE": str(tmp_path / "config"),
    }
    got = S3Settings.from_env({**files, "AWS_PROFILE": "work"})
    assert (got.access_key_id, got.secret_access_key) == ("FILEKEY", "FILESECRET")
    assert (got.region, got.endpoint) == ("eu-west-3", "http://127.0.0.1:9")
    assert "FILESECRET" not in repr(got)
    env = {**files, "AWS_PROFILE": "work", "AWS_ACCESS_KEY_ID": "K", "AWS_SECRET_ACCESS_KEY": "S"}
    env["AWS_DEFAULT_REGION"] = "ap-south-1"
    got = S3Settings.from_env(env)
    assert (got.access_key_id, got.secret_access_key, got.region) == ("K", "S", "ap-south-1")
    with pytest.raises(InvalidInput, match="AWS_PROFILE"):
        S3Settings.from_env({**files, "AWS_PROFILE": "nope"})


def test_reads_sent_ahead_are_each_answered_once_as_the_server_would(
    moto_s3: S3Server,
) -> None:
    s3 = s3_storage(moto_s3)
    s3.put("s/report.json", b'{"r": 1}')
    s3.put("s/session.json", b'{"big": "xxxxxxxx"}')
    s3.put("s/trials/1/trial.json", b"{}")
    s3.put("s/dual", b"object")
    s3.put("s/dual/x", b"below")
    held = ["report.json", "session.json", "constraints.json", "dual"]
    with s3.ahead.holding("s", held, ["trials", "service"]):
        # Changed after the reads were sent: the first read of each is what was sent.
        s3.put("s/report.json", b'{"r": 2}')
        s3.put("s/constraints.json", b"{}")
        s3.put("s/trials/2/trial.json", b"{}")
        assert s3.get("s/report.json", 100) == b'{"r": 1}'
        assert s3.get("s/report.json", 100) == b'{"r": 2}'  # once: then the server's
        assert s3.get("s/constraints.json", 100) is None  # absent when it was sent
        assert s3.get("s/constraints.json", 100) == b"{}"
        with pytest.raises(TooLarge):
            s3.get("s/session.json", 5)  # the limit asked is the caller's
        assert s3.get("s/dual", 100) == b"object"  # a prefix too: always the server's
        assert [item.name for item in s3.list("s/trials")] == ["1"]
        assert [item.name for item in s3.list("s/trials")] == ["1", "2"]
        assert list(s3.list("s/service")) == []
    assert s3.get("s/session.json", 100) == b'{"big": "xxxxxxxx"}'  # outside: the server's


def test_no_credential_is_in_a_repr() -> None:
    # The dataclass's repr showed the endpoint whole: a proxy's password in its user info.
    secrets = ("proxy-pass-5e1", "AKIDEXAMPLE12345", "wJalrXUtnFEMIsecretkey", "tok-en-12345")
    settings = S3Settings("http://proxy-user:proxy-pass-5e1@127.0.0.1:9", "us-east-1", *secrets[1:])
    storage = S3Storage(parse_s3_url("s3://b-x/p"), settings)
    for text in (repr(settings), str(settings), repr(storage), str(storage)):
        assert "http://***@127.0.0.1:9" in text
        assert not any(secret in text for secret in secrets), text
