"""Dashboard sessions any process of a deployment can serve: signed with the deployment's secret.

Two `Sessions` with one secret are two processes: a session opened by one is taken by the other
(its principal, its CSRF token), unless the signature, the expiry, the principal's standing as a
reviewer or its ending here says otherwise. Then a real `ontoos serve --workers 2`: a reviewer signed
in once is served by whichever worker answers, forms included.
"""

from __future__ import annotations

import pytest

from ontoos_explore.server.config import Principal
from ontoos_explore.server.sessions import Sessions
from tests.governance.dashboard import REV, call, post_form, sign_in, start_dashboard

REX = Principal("rex", "admin", True)
PEOPLE = {"rex": REX, "ann": Principal("ann", "analyst", False)}


def two(secret="the-deployments-own-secret", wall=None):
    clock = {"now": 1_000_000.0}
    wall = wall or (lambda: clock["now"])
    made = [Sessions(3600, secret=secret, resolve=PEOPLE.get, wall=wall) for _ in range(2)]
    return made, clock


def test_a_session_opened_by_one_process_is_served_by_another():
    (a, b), _ = two()
    opened = a.open(REX)
    taken = b.get(opened.id)
    assert taken is not None and taken.principal == REX and taken.csrf_matches(opened.csrf)
    assert b.principal_for(opened.id) == REX


def test_what_another_process_does_not_take():
    (a, b), clock = two()
    opened = a.open(REX)
    body, signature = opened.id.split(".")
    assert b.get(f"{body}.{signature[:-2]}AA") is None  # altered
    (other, _), _ = two(secret="another-deployments-secret")
    assert other.get(opened.id) is None  # another deployment's
    not_a_reviewer = a.open(PEOPLE["ann"])
    assert b.get(not_a_reviewer.id) is None
    gone = a.open(Principal("zed", "admin", True))  # no longer in the configuration
    assert b.get(gone.id) is None
    b.end(opened.id)
    assert b.get(opened.id) is None  # ended here: not taken again here
    fresh = a.open(REX)
    clock["now"] += 3601
    assert b.get(fresh.id) is None  # expired


def test_a_sign_out_told_to_another_process_ends_the_session_there():
    (a, b), _ = two()
    told: list[tuple[bytes, float]] = []
    a.on_end = lambda key, until: told.append((key, until))
    opened = a.open(REX)
    assert b.get(opened.id) is not None  # b has taken it into its table
    a.end(opened.id)
    [(key, until)] = told
    assert until == pytest.approx(1_000_000.0 + 3600, abs=1)  # the wall-clock expiry: the row may go then
    assert b.forget(told) == 1 and b.get(opened.id) is None
    assert b.forget(told) == 0  # told twice: ended once
    a.end("not-a-session-at-all")
    assert len(told) == 1  # only a session that was open is told


def test_without_a_secret_ids_are_this_processs_own():
    a, b = Sessions(3600), Sessions(3600)
    opened = a.open(REX)
    assert a.get(opened.id) is not None and b.get(opened.id) is None


def test_a_reviewer_signed_in_once_is_served_by_either_worker(pg_dsn, tmp_path):
    dash = start_dashboard(pg_dsn, tmp_path / "dash", args=("--workers", "2"))
    try:
        signed = sign_in(dash, REV)
        pages = [call(dash, "GET", "/governance", headers=signed.header).status for _ in range(16)]
        approved = [post_form(dash, "/governance/approve", {"id": "hosts_by_provider"}, signed).status
                    for _ in range(4)]  # the CSRF token of the session, checked by whichever worker
    finally:
        dash.srv.stop_cleanly()
    assert pages == [200] * 16
    assert approved == [303] * 4


def test_a_sign_out_on_either_worker_ends_the_session_on_both(pg_dsn, tmp_path):
    """Signed out through whichever worker took the form, the cookie is refused by both within about a
    second (the ended session's key goes through the shared state)."""
    import time

    dash = start_dashboard(pg_dsn, tmp_path / "dash", args=("--workers", "2"))
    try:
        signed = sign_in(dash, REV)
        assert [call(dash, "GET", "/governance", headers=signed.header).status for _ in range(8)] == [200] * 8
        out = post_form(dash, "/governance/logout", {}, signed)
        assert out.status == 303 and out.headers["location"] == "/governance/login?done=signed_out"
        time.sleep(2.0)
        after = [call(dash, "GET", "/governance", headers=signed.header) for _ in range(16)]
    finally:
        dash.srv.stop_cleanly()
    assert [(r.status, r.headers.get("location")) for r in after] == [(303, "/governance/login")] * 16
