"""Decides which sanitizer reports in a directory are findings (scripts/sanitize).

    python3 scripts/sanitizers/triage.py REPORT_DIR    -> the findings, then "findings: N"

- A report from our product binaries (vaultd, vaultctl, vault-fpstub) always
  counts; third-party noise there is suppressed by name in the .supp files.
- In a test runner (*.xctest), every ASan or TSan error counts. A LeakSanitizer
  report counts only for a *direct* leak allocated through our product code (a
  frame in Sources/ or Plugins/). What else a runner leaks at exit is XCTest's
  run objects, Foundation's caches and test fixtures, and LSan's suppressions do
  not follow the indirect leaks hanging off them, so listing them by name would
  take a suppression per test.
"""
import pathlib
import re
import sys

OURS = re.compile(r"/(Sources|Plugins)/")
findings = 0
for report in sorted(pathlib.Path(sys.argv[1]).glob("report.*")):
    text = report.read_text(errors="replace")
    exe = report.name.split(".")[1]
    runner = report.name.endswith(".xctest") or ".xctest." in report.name
    counted = []
    for block in re.split(r"\n(?==+\n|WARNING: |Direct leak of|Indirect leak of)", text):
        head = block.lstrip("=\n").splitlines()[0] if block.strip("=\n") else ""
        if head.startswith("Indirect leak of"):
            if not runner:
                counted.append(block)
        elif head.startswith("Direct leak of"):
            if not runner or OURS.search(block):
                counted.append(block)
        elif "ERROR: LeakSanitizer" in head or head.startswith("SUMMARY"):
            continue
        elif "ERROR: " in head or "WARNING: ThreadSanitizer" in head:
            counted.append(block)
    if counted:
        findings += 1
        print(f"-- {report.name} ({exe}): {len(counted)} finding(s); first:")
        print("\n".join(counted[0].strip("=\n").splitlines()[:30]))
    elif runner:
        print(f"-- {report.name}: runner leaks outside our code only, not counted")
print(f"findings: {findings}")
