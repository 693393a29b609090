"""The report of a verification run: Markdown (written next to the JSON) and the terminal
summary."""

from __future__ import annotations

from typing import Any

from .responses import excerpt, fmt


def render_markdown(report: dict[str, Any]) -> str:
    """The Markdown summary written next to the JSON report."""
    verdict = "PASS" if report["ok"] else "FAIL"
    srv = report.get("server") or {}
    lines = [
        f"# Verification {verdict}: {report.get('model') or '?'} at {report['url']}",
        "",
        f"- Started {report['started']}, took {report['seconds']:.1f} s; suite `{report['suite']}`",
        f"- Server: vLLM {srv.get('version') or '?'}, "
        f"max_model_len {srv.get('max_model_len') or '?'}",
        "",
        "| Check | Result | Detail |",
        "|---|---|---|",
    ]
    for c in report["checks"]:
        detail = str(c["detail"]).replace("|", "\\|").replace("\n", " ")
        lines.append(f"| {c['name']} | {c['status']} | {detail} |")
    if report["cases"]:
        lines += ["", "## Cases", "", "| Case | Result | Answer | Why |", "|---|---|---|---|"]
        for c in report["cases"]:
            ans = excerpt(c.get("answer") or "", 80).replace("|", "\\|").replace("\n", " ")
            why = "; ".join(c.get("why") or []).replace("|", "\\|")
            lines.append(f"| {c['id']} | {'pass' if c['ok'] else 'fail'} | {ans} | {why} |")
    perf = report.get("performance") or {}
    if perf:
        lines += [
            "",
            "## Performance",
            "",
            f"- {perf['concurrency']} concurrent requests x {perf['max_tokens']} tokens: "
            f"{perf['requests_ok']} ok, {perf['requests_failed']} failed",
            f"- Time to first token: p50 {fmt(perf['ttft_s']['p50'])} s, "
            f"p95 {fmt(perf['ttft_s']['p95'])} s",
            f"- Tokens per second per request: p50 {fmt(perf['tokens_per_s']['p50'], 1)}, "
            f"p95 {fmt(perf['tokens_per_s']['p95'], 1)}; aggregate "
            f"{fmt(perf.get('aggregate_tokens_per_s'), 1)}",
        ]
        if "kv_cache_usage_peak" in perf:
            peak = perf["kv_cache_usage_peak"]
            lines.append(
                f"- KV cache: peak usage {'-' if peak is None else f'{peak:.0%}'}, "
                f"preemptions {perf['preemptions']:.0f}"
            )
    if report["failures"]:
        lines += ["", "## Failures", ""] + [f"- {f}" for f in report["failures"]]
    return "\n".join(lines) + "\n"


def render_human(report: dict[str, Any]) -> str:
    out = [
        f"verify {report['url']} ({report.get('model') or '?'}): "
        + ("PASS" if report["ok"] else "FAIL")
    ]
    for c in report["checks"]:
        mark = {"pass": "ok  ", "fail": "FAIL", "skipped": "skip"}[c["status"]]
        out.append(f"  {mark} {c['name']:<14} {c['detail']}")
    for c in report["cases"]:
        if not c["ok"]:
            out.append(f"       case {c['id']}: {'; '.join(c['why'])}")
    return "\n".join(out)
