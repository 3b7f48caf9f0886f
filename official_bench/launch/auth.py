"""The barrier's shared secret and the message authentication built on it.

Where the secret comes from, first found wins:

1. BARRIER_SECRET (its text) or BARRIER_SECRET_FILE (the file's content
   without surrounding whitespace), read by settings.py. Setting both is an
   error. This is the only source that is a real secret.
2. Inside a Slurm job (SLURM_JOB_ID set): SHA-256 of the text
   "official_bench barrier|<SLURM_JOB_ID>|<SLURM_JOB_NODELIST>", the same on
   every node of the job without any set-up. Its limits: it is not secret.
   Anyone who can read the job's environment knows it, and every user of the
   cluster can compute it (squeue shows job ids and node lists). It keeps
   out machines outside the cluster and the launchers of other jobs (two
   benchmark jobs on the same nodes and ports do not meet each other's
   nodes), not other users of the cluster; set BARRIER_SECRET for that.
3. Nothing: the barrier is open (an empty key, so the protocol is the same)
   and the launcher prints one warning line. Anyone who can reach node 0's
   barrier port can then join as a node or disturb the run: the launcher
   assumes a trusted network, as TensorFlow's own worker servers do.

Each message is tagged with HMAC-SHA256 (keyed with the secret) over the
message and two per-connection random nonces; see barrier.py for the
exchange and why it stops replays.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import secrets
from typing import Mapping, Optional

PROTOCOL = "official_bench barrier v1"
SAME_SECRET = "the same BARRIER_SECRET or BARRIER_SECRET_FILE on every node"
# What to do when the nodes' keys differ (none derived from a Slurm job).
SECRET_FIX = f"Set {SAME_SECRET} (or none on any)"
NONCE_BYTES = 16


@dataclasses.dataclass(frozen=True)
class BarrierKey:
    """The HMAC key and where it came from (for messages; never the key)."""
    key: bytes = dataclasses.field(repr=False)
    source: str  # "BARRIER_SECRET (env)", "Slurm job 123", "none" ...
    secret: bool  # False: open barrier (no key) or Slurm-derived

    @property
    def open(self) -> bool:
        return not self.key

    @property
    def brief(self) -> str:
        """Where it came from in a few words, which node 0's barrier tells
        a node whose key does not verify: never the key, nor a file's
        path."""
        if self.open:
            return "none (not inside a Slurm job, no BARRIER_SECRET)"
        if self.secret:
            return self.source.split(" ")[0]  # BARRIER_SECRET[_FILE]
        return self.source.split(" (")[0]  # derived from Slurm job N

    def mismatch_fix(self, other: str) -> str:
        """What to do when this key and `other` (the other side's brief)
        differ."""
        slurm = any(t.startswith("derived from Slurm job")
                    for t in (self.brief, other))
        if slurm:
            return ("Run every node's launcher inside the same Slurm job "
                    f"(srun), or set {SAME_SECRET}")
        return SECRET_FIX


OPEN = BarrierKey(b"", "none", False)


def slurm_key(slurm: Mapping[str, str]) -> Optional[BarrierKey]:
    """The key every node of a Slurm job derives alike, or None outside one.

    Uses SLURM_JOB_ID and the job's node list (SLURM_JOB_NODELIST, else
    SLURM_NODELIST): both are the same on every node of the job, unlike the
    step's variables. Not secret (see the module docstring)."""
    job = slurm.get("SLURM_JOB_ID")
    if not job:
        return None
    nodelist = slurm.get("SLURM_JOB_NODELIST") or \
        slurm.get("SLURM_NODELIST") or ""
    text = f"official_bench barrier|{job}|{nodelist}"
    return BarrierKey(hashlib.sha256(text.encode("utf-8")).digest(),
                      f"derived from Slurm job {job} (not secret: anyone who "
                      "can read the job's environment or run squeue on the "
                      "cluster can compute it)", False)


def choose_key(secret: Optional[str], secret_from: Optional[str],
               slurm: Mapping[str, str]) -> BarrierKey:
    """BARRIER_SECRET[_FILE] > the Slurm job > open (see module docstring)."""
    if secret:
        return BarrierKey(secret.encode("utf-8"), secret_from or "secret",
                          True)
    return slurm_key(slurm) or OPEN


def key_for(settings) -> BarrierKey:
    """This launcher's key, from its Settings (settings.py reads the
    environment and the secret file)."""
    return choose_key(settings.barrier_secret, settings.barrier_secret_from,
                      settings.slurm)


def open_warning(port: int) -> str:
    """The one line printed when the barrier has no key."""
    return (f"warning: the barrier (port {port}) is open: no BARRIER_SECRET "
            "or BARRIER_SECRET_FILE and not in a Slurm job, so anyone who can "
            "reach that port can join as a node; this assumes a trusted "
            "network (see docs/security.md)")


def new_nonce() -> str:
    """A fresh random nonce (hex), one per connection and side."""
    return secrets.token_hex(NONCE_BYTES)


def tag(key: bytes, kind: str, server_nonce: str, client_nonce: str,
        body: str) -> str:
    """HMAC-SHA256 of one message, bound to both nonces and its direction.

    kind is "request" or "reply", so a request can never pass as a reply.
    The nonces are fixed-length hex and the separators cannot occur in them,
    so the tagged text is unambiguous."""
    text = "\0".join((PROTOCOL, kind, server_nonce, client_nonce, body))
    return hmac.new(key, text.encode("utf-8"), hashlib.sha256).hexdigest()


def verify(key: bytes, kind: str, server_nonce: str, client_nonce: str,
           body: str, mac: object) -> bool:
    """Whether mac is the tag of this message (constant-time compare)."""
    if not isinstance(mac, str) or not isinstance(body, str):
        return False
    return hmac.compare_digest(
        tag(key, kind, server_nonce, client_nonce, body), mac)
