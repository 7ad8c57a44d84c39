"""String formats of an InferenceModel: storage URIs and S3 endpoints, image references,
cron schedules and time zones.

Each is a pattern (for the schema, and for generating valid specs in tests) plus CEL
:class:`Check` rules that say in words what is expected, all run in Python too.
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import Field

from shoal.api.common import Check, TextFormat, cel_string, matches

# ----------------------------------------------------------------------------- storage URIs

# Bucket names as the stores accept them. S3: 3 to 63 lowercase letters, digits, '.' and
# '-', starting and ending with a letter or digit, no '..', not an IP address. GCS: also
# '_', up to 222 characters whose dot-separated parts have at most 63, not starting with
# "goog" nor containing "google". A claim is a PersistentVolumeClaim's name (a DNS
# subdomain); an https host is a host name or IPv4 address, with an optional port (an
# IPv6 literal is not taken: the operator's URL parser would have to agree on its form).
_S3_BUCKET = r"[a-z0-9][-a-z0-9.]*[a-z0-9]"
_GCS_BUCKET = r"[a-z0-9][-a-z0-9_.]*[a-z0-9]"
_CLAIM = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
_PORT = r"([1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5])"
_HOST = (
    rf"[A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?(\.[A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?)*(:{_PORT})?"
)
# Printable ASCII only ([!-~]): no spaces, no look-alike Unicode. Credentials before the
# host, queries and fragments are each refused by a rule of their own, with its reason.
STORAGE_URI_PATTERN = (
    rf"^(s3://{_S3_BUCKET}|gs://{_GCS_BUCKET}|pvc://{_CLAIM}|https://([^/@?#]*@)?{_HOST})"
    r"(/[!-~]*)?$"
)


def _authority(uri: str) -> str:
    return uri.split("/")[2] if uri.count("/") >= 2 else ""


_IPV4 = r"^[0-9]+(\.[0-9]+){3}$"
_BUCKET_CEL = (
    "(!(self.startsWith('s3://') || self.startsWith('gs://')) || "
    "(size(self.split('/')[2]) >= 3 && !self.split('/')[2].contains('..') "
    f"&& !self.split('/')[2].matches({cel_string(_IPV4)}) && "
    "(self.startsWith('s3://') ? size(self.split('/')[2]) <= 63 : "
    "size(self.split('/')[2]) <= 222 "
    "&& self.split('/')[2].split('.').all(part, size(part) <= 63) "
    "&& !self.split('/')[2].startsWith('goog') && !self.split('/')[2].contains('google'))))"
    " && (!self.startsWith('pvc://') || size(self.split('/')[2]) <= 253)"
)


def _bucket_ok(uri: str) -> bool:
    s3, gcs = uri.startswith("s3://"), uri.startswith("gs://")
    if uri.startswith("pvc://"):
        return len(_authority(uri)) <= 253
    if not (s3 or gcs):
        return True
    bucket = _authority(uri)
    if len(bucket) < 3 or ".." in bucket or matches(_IPV4, bucket):
        return False
    if s3:
        return len(bucket) <= 63
    return (
        len(bucket) <= 222
        and all(len(part) <= 63 for part in bucket.split("."))
        and not bucket.startswith("goog")
        and "google" not in bucket
    )


# A '.' or '..' path segment, also percent-encoded or behind an encoded separator.
_SEPARATOR = r"(/|\\|%2[fF]|%5[cC])"
_TRAVERSAL = rf"{_SEPARATOR}(\.|%2[eE])(\.|%2[eE])?({_SEPARATOR}|$)"
# Anything before an '@' in the authority: user, or user:password.
_USERINFO = r"^[a-z0-9]+://[^/?#]*@"
# An https:// URL whose path ends in one of these names an archive the fetch downloads
# and unpacks (render.model_fetch); any other URL names a directory. The fetch image's
# tar and unzip (busybox's in rclone/rclone, GNU's and Info-ZIP's elsewhere) read these.
_ARCHIVE = r"(?i)\.(tar|tar\.gz|tgz|zip)$"
ARCHIVE_WORDS = ".tar, .tar.gz, .tgz or .zip"
# Other archives and compressed files, refused rather than copied as if a directory.
_OTHER_ARCHIVE = r"(?i)\.(tar\.[a-z0-9]+|tbz|tbz2|txz|tzst|7z|rar|gz|bz2|xz|zst|lz4)$"

StorageUri = Annotated[
    str,
    Field(pattern=STORAGE_URI_PATTERN, max_length=2048),
    Check(
        cel=f"self.matches({cel_string(STORAGE_URI_PATTERN)})",
        check=lambda uri: matches(STORAGE_URI_PATTERN, uri),
        message="must be s3://bucket/path, gs://bucket/path, pvc://claim/path or "
        "https://host[:port]/path, in printable ASCII without spaces",
    ),
    Check(
        cel=_BUCKET_CEL,
        check=_bucket_ok,
        message="must name a bucket or claim as its store accepts it: S3 3 to 63 lowercase "
        "letters, digits, '.' and '-'; GCS also '_', up to 222 characters in dot-separated "
        "parts of at most 63, without 'google'; neither with '..' nor shaped like an IP "
        "address; a PersistentVolumeClaim name of at most 253 characters",
    ),
    Check(
        cel=f"!self.matches({cel_string(_TRAVERSAL)})",
        check=lambda uri: re.search(_TRAVERSAL, uri) is None,
        message="must not contain '.' or '..' path segments (nor %2e%2e): the path would "
        "leave the bucket or claim",
    ),
    Check(
        cel=f"!self.matches({cel_string(_USERINFO)})",
        check=lambda uri: re.search(_USERINFO, uri) is None,
        message="must not carry credentials (user:password@host), which would show in the "
        "pod's arguments: give the pods a cloud identity (IRSA on EKS, Workload Identity on "
        "GKE) and use s3:// or gs://, name a Secret in s3.credentialsSecret for an "
        "S3-compatible store, or serve the files from a PersistentVolumeClaim (pvc://)",
    ),
    Check(
        cel="!self.contains('?') && !self.contains('#')",
        check=lambda uri: "?" not in uri and "#" not in uri,
        message="must not have a query (?) or fragment (#): the files are copied from the "
        "path alone",
    ),
    Check(
        cel=f"self.startsWith('https://') || !self.matches({cel_string(_ARCHIVE)})",
        check=lambda uri: uri.startswith("https://") or re.search(_ARCHIVE, uri) is None,
        message="must name the directory of the model's version directories for s3://, "
        f"gs:// and pvc://: only an https:// URL may name an archive ({ARCHIVE_WORDS})",
    ),
    Check(
        cel=f"!self.startsWith('https://') || self.matches({cel_string(_ARCHIVE)}) || "
        f"!self.matches({cel_string(_OTHER_ARCHIVE)})",
        check=lambda uri: (
            not uri.startswith("https://")
            or re.search(_ARCHIVE, uri) is not None
            or re.search(_OTHER_ARCHIVE, uri) is None
        ),
        message=f"must end in {ARCHIVE_WORDS} to name an archive: the fetch container "
        "unpacks those with tar and unzip, no other archive or compressed file",
    ),
]


def archive_format(uri: str) -> str | None:
    """How the fetch unpacks an (admitted) https:// archive URL: ``tar.gz``, ``tar`` or
    ``zip``; None for a directory listing or another scheme."""
    if not uri.startswith("https://"):
        return None
    found = re.search(_ARCHIVE, uri)
    if found is None:
        return None
    suffix = found.group(0).lower()
    return "tar" if suffix == ".tar" else "zip" if suffix == ".zip" else "tar.gz"


# An S3-compatible store's endpoint: a scheme and a host (a name or an IPv4 address) with
# an optional port, nothing after it. Plain http is allowed: in-cluster stores (MinIO,
# Ceph RGW) often serve it on a network the pool's policies already confine.
S3_ENDPOINT_PATTERN = rf"^https?://{_HOST}/?$"
S3Endpoint = Annotated[
    str,
    TextFormat(
        S3_ENDPOINT_PATTERN,
        "an S3-compatible endpoint such as http://minio.storage.svc:9000: http:// or "
        "https://, a host name or IPv4 address and an optional port, without a path, "
        "query or credentials",
        max_length=512,
        example="http://minio.storage.svc:9000",
    ),
]

# ----------------------------------------------------------------------------- images

# The container image reference grammar (github.com/distribution/reference): an
# optional registry host[:port], a lowercase repository path, a tag and/or a digest.
_DOMAIN_PART = r"([A-Za-z0-9]|[A-Za-z0-9][-A-Za-z0-9]*[A-Za-z0-9])"
_DOMAIN = rf"({_DOMAIN_PART}(\.{_DOMAIN_PART})*|\[[0-9A-Fa-f:]+\])(:[0-9]+)?"
_PATH_PART = r"[a-z0-9]+(([._]|__|-+)[a-z0-9]+)*"
_TAG = r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*([-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9A-Fa-f]{32,}"
IMAGE_PATTERN = rf"^({_DOMAIN}/)?{_PATH_PART}(/{_PATH_PART})*(:{_TAG})?(@{_DIGEST})?$"
ImageReference = Annotated[
    str,
    TextFormat(
        IMAGE_PATTERN,
        "an image reference such as nvcr.io/nvidia/tritonserver:24.10-py3: an optional "
        "registry, a lowercase repository, a tag and/or a digest, without spaces",
        max_length=512,
        min_length=1,
    ),
]

# ----------------------------------------------------------------------------- schedules


def _names(*names: str) -> str:
    """Case-insensitive alternatives, as croniter reads month and weekday names."""
    return "|".join("".join(f"[{c.upper()}{c.lower()}]" for c in name) for name in names)


def _cron_field(value: str, step: str) -> str:
    item = rf"(\*|({value})(-({value}))?)(/({step}))?"
    return f"{item}(,{item})*"


_MONTHS = _names("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_WEEKDAYS = _names("sun", "mon", "tue", "wed", "thu", "fri", "sat")
# Five fields with their ranges: minute 0-59, hour 0-23, day 1-31, month 1-12 or
# jan-dec, weekday 0-7 (0 and 7 are Sunday) or sun-sat; each a list of *, values or
# ranges, each with an optional /step. A regular expression cannot see that a range
# runs backwards or that a day never comes (31 2): the operator reports those.
CRON_PATTERN = (
    "^"
    + " +".join(
        (
            _cron_field("[0-5]?[0-9]", "[1-9]|[1-5][0-9]"),
            _cron_field("[01]?[0-9]|2[0-3]", "[1-9]|1[0-9]|2[0-3]"),
            _cron_field("0?[1-9]|[12][0-9]|3[01]", "[1-9]|[12][0-9]|3[01]"),
            _cron_field(f"0?[1-9]|1[0-2]|{_MONTHS}", "[1-9]|1[0-2]"),
            _cron_field(f"0?[0-7]|{_WEEKDAYS}", "[1-7]"),
        )
    )
    + "$"
)
CronSchedule = Annotated[
    str,
    TextFormat(
        CRON_PATTERN,
        "a five-field cron expression such as '0 8 * * 1-5': minute 0-59, hour 0-23, day "
        "1-31, month 1-12 or jan-dec, weekday 0-7 or sun-sat, each a list of *, values or "
        "ranges with an optional /step",
        max_length=128,
        example="0 8 * * 1-5",
    ),
]

_AREAS = [
    "Africa",
    "America",
    "Antarctica",
    "Arctic",
    "Asia",
    "Atlantic",
    "Australia",
    "Brazil",
    "Canada",
    "Chile",
    "Europe",
    "Indian",
    "Mexico",
    "Pacific",
    "US",
]
# The zones of the IANA database that are a single name (most are old links).
_SINGLE_ZONES = [
    "CET",
    "CST6CDT",
    "Cuba",
    "EET",
    "EST",
    "EST5EDT",
    "Egypt",
    "Eire",
    "GB",
    "GB-Eire",
    "GMT",
    "GMT+0",
    "GMT-0",
    "GMT0",
    "Greenwich",
    "HST",
    "Hongkong",
    "Iceland",
    "Iran",
    "Israel",
    "Jamaica",
    "Japan",
    "Kwajalein",
    "Libya",
    "MET",
    "MST",
    "MST7MDT",
    "NZ",
    "NZ-CHAT",
    "Navajo",
    "PRC",
    "PST8PDT",
    "Poland",
    "Portugal",
    "ROC",
    "ROK",
    "Singapore",
    "Turkey",
    "UCT",
    "UTC",
    "Universal",
    "W-SU",
    "WET",
    "Zulu",
]
TIME_ZONE_PATTERN = (
    r"^(Etc/[A-Za-z0-9+-]{1,14}|("
    + "|".join(_AREAS)
    + r")(/[A-Z][A-Za-z_-]*){1,2}|"
    + "|".join(zone.replace("+", r"\+") for zone in _SINGLE_ZONES)
    + ")$"
)
TimeZone = Annotated[
    str,
    TextFormat(
        TIME_ZONE_PATTERN,
        "an IANA time zone such as Europe/Paris, America/New_York or UTC",
        max_length=64,
        example="Europe/Paris",
    ),
]
