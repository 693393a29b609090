"""Prometheus ``file_sd`` targets for the fleet's replicas, written on the controller.

The file is what Prometheus' ``file_sd_configs`` reads
(https://prometheus.io/docs/prometheus/latest/configuration/configuration/#file_sd_config):
a JSON list of target groups ``{"targets": ["host:port"], "labels": {...}}``. One group per
replica, labelled with its host, NPUs, served model, service and container name. A deploy
replaces the groups of the hosts it deployed, keeps those of the other hosts still in the
fleet (failed, not run, left out by ``--limit``) and drops hosts no longer in it; given the
service each replaced host ran, it replaces only that (host, service)'s groups. The file is
replaced atomically (temporary file in the same directory, fsync, rename): Prometheus never
reads half a file. Standard library only.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Iterable, Mapping, Sequence

from ..errors import InputError, shown

LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
# The labels every group carries; ``host`` decides which deploy owns a group.
REPLICA_LABELS = ("host", "npu", "model", "service", "replica")


def target(address: str, port: int | str) -> str:
    """``address:port``; an IPv6 address is put in brackets."""
    address = str(address).strip()
    if not address or any(c.isspace() for c in address) or "/" in address:
        raise InputError(f"file_sd: scrape address {shown(address)} is not a host name or IP")
    try:
        number = int(port)
    except (TypeError, ValueError):
        number = 0
    if not 0 < number < 65536:
        raise InputError(f"file_sd: port {shown(port)} of {address} is not a TCP port (1-65535)")
    if ":" in address and not address.startswith("["):
        address = f"[{address}]"
    return f"{address}:{number}"


def _check_labels(labels: Mapping[str, object], where: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, value in labels.items():
        if not isinstance(name, str) or not LABEL_NAME.match(name):
            raise InputError(
                f"file_sd: {where}: label name {shown(name)} is not valid in Prometheus "
                "(letters, digits and _, not starting with a digit)"
            )
        if not isinstance(value, (str, int, float)) or isinstance(value, bool):
            raise InputError(f"file_sd: {where}: label {name} has a {type(value).__name__} value")
        out[name] = str(value)
    return out


def replica_group(replica: Mapping, extra_labels: Mapping[str, object] | None = None) -> dict:
    """The target group of one replica.

    ``replica`` has ``host`` (inventory name), ``address`` (what Prometheus connects to),
    ``port``, ``npus`` (NPU ids), ``model`` (served name), ``service`` and ``replica``
    (container name). ``extra_labels`` are added; they cannot replace the replica's own.
    """
    missing = [k for k in ("host", "address", "port", "npus", "model") if k not in replica]
    if missing:
        raise InputError(f"file_sd: replica {shown(dict(replica))} lacks {', '.join(missing)}")
    host = str(replica["host"])
    npus = replica["npus"]
    npu = ",".join(str(n) for n in npus) if isinstance(npus, (list, tuple)) else str(npus)
    own = {
        "host": host,
        "npu": npu,
        "model": str(replica["model"]),
        "service": str(replica.get("service", "")),
        "replica": str(replica.get("replica", "")),
    }
    labels = _check_labels(dict(extra_labels or {}), f"extra labels of {host}")
    clash = sorted(set(labels) & set(own))
    if clash:
        raise InputError(
            f"file_sd: extra label(s) {', '.join(clash)} would replace the replica's own"
        )
    labels.update({k: v for k, v in own.items() if v})
    return {"targets": [target(replica["address"], replica["port"])], "labels": labels}


def validate(groups: object, where: str) -> list[dict]:
    """``groups`` as file_sd requires it: a list of {targets: [str], labels: {name: str}}."""
    if not isinstance(groups, list):
        raise InputError(f"file_sd: {where} is not a JSON list of target groups")
    out = []
    for i, group in enumerate(groups):
        if not isinstance(group, dict) or set(group) - {"targets", "labels"}:
            raise InputError(f"file_sd: {where}: entry {i} is not {{targets, labels}}")
        targets = group.get("targets")
        if not isinstance(targets, list) or not all(isinstance(t, str) and t for t in targets):
            raise InputError(f"file_sd: {where}: entry {i} has no list of targets")
        labels = _check_labels(group.get("labels") or {}, f"{where}: entry {i}")
        out.append({"targets": list(targets), "labels": labels})
    return out


def load(path: str) -> list[dict]:
    """The groups already in ``path`` ([] when it does not exist)."""
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise InputError(f"file_sd: cannot read {path}: {exc.strerror}") from exc
    try:
        data = json.loads(text) if text.strip() else []
    except json.JSONDecodeError as exc:
        raise InputError(
            f"file_sd: {path} is not JSON ({exc.msg}, line {exc.lineno}); "
            "remove it and re-run (the next deploy writes it anew)"
        ) from exc
    return validate(data, path)


def _key(group: Mapping) -> tuple:
    labels = group.get("labels") or {}
    return (labels.get("host", ""), labels.get("service", ""), labels.get("replica", ""),
            group.get("targets", []))  # fmt: skip


def merge(
    existing: Iterable[dict],
    groups: Iterable[dict],
    replaced_hosts: Iterable[str],
    fleet: Iterable[str] | None = None,
    services: Mapping[str, str] | None = None,
) -> list[dict]:
    """``existing`` without the groups of ``replaced_hosts`` (and of hosts not in ``fleet``,
    when given), plus ``groups``; sorted by host, service, replica. A host named in
    ``services`` loses only the groups of that service: two services on one host keep each
    other's targets through each other's deploy and undeploy."""
    replaced = set(replaced_hosts)
    only = dict(services or {})
    keep_hosts = None if fleet is None else set(fleet)

    def replaced_group(labels: Mapping) -> bool:
        host = labels.get("host")
        if host not in replaced:
            return False
        return host not in only or labels.get("service", "") == only[host]

    kept = [
        g
        for g in existing
        if not replaced_group(g.get("labels") or {})
        and (keep_hosts is None or (g.get("labels") or {}).get("host") in keep_hosts)
    ]
    return sorted([*kept, *groups], key=_key)


def render(groups: Sequence[dict]) -> str:
    return json.dumps(list(groups), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def write(path: str, groups: Sequence[dict], mode: int = 0o644) -> bool:
    """Replace ``path`` atomically with ``groups``; False when it already holds exactly that."""
    text = render(validate(list(groups), "the new targets"))
    try:
        with open(path, encoding="utf-8") as fh:
            if fh.read() == text:
                return False
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise InputError(f"file_sd: cannot read {path}: {exc.strerror}") from exc
    directory = os.path.dirname(os.path.abspath(path))
    try:
        os.makedirs(directory, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".file_sd-", suffix=".tmp", dir=directory)
    except OSError as exc:
        raise InputError(f"file_sd: cannot write into {directory}: {exc.strerror}") from exc
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except OSError as exc:
        raise InputError(f"file_sd: cannot write {path}: {exc.strerror}") from exc
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    return True


def update(
    path: str,
    replicas: Iterable[Mapping],
    replaced_hosts: Iterable[str],
    fleet: Iterable[str] | None = None,
    extra_labels: Mapping[str, object] | None = None,
    check: bool = False,
    services: Mapping[str, str] | None = None,
) -> tuple[bool, list[dict]]:
    """Merge the replicas' groups into ``path``; return (changed, the groups in the file)."""
    replaced = set(replaced_hosts)
    groups = [replica_group(r, extra_labels) for r in replicas]
    strays = sorted({g["labels"]["host"] for g in groups} - replaced)
    if strays:
        raise InputError(
            f"file_sd: replicas of {', '.join(strays)} given, but not among the replaced hosts"
        )
    merged = merge(load(path), groups, replaced, fleet, services)
    if check:
        try:
            with open(path, encoding="utf-8") as fh:
                return fh.read() != render(merged), merged
        except FileNotFoundError:
            return True, merged
    return write(path, merged), merged
