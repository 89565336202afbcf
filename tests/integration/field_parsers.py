"""How the field's scripts read nccl-tests' text output, written as those
scripts read it (not as gpudiag's own tests would): node health checks that
run `all_reduce_perf ... -g 1`, take the rows with a digit-row regex, and the
bandwidth with `grep "# Avg bus bandwidth" | awk '{print $NF}'`; harnesses that
split every row on whitespace into 13 fields. Each reader returns what its
script would publish, or raises where the script would have failed."""
import re
import subprocess

# A health check's row regex: size, count, type, redop, root, then two halves of
# time, algbw, busbw, #wrong. Rows start with spaces and a digit.
ROW = re.compile(r"^\s+(\d+)\s+(\d+)\s+(\w+)\s+(\w+)\s+(-?\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)"
                 r"\s+(\S+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+(\S+)\s*$", re.M)


def regex_rows(text):
    """The rows a regex-based health check finds."""
    return [m.groups() for m in ROW.finditer(text)]


def avg_busbw_shell(text):
    """`grep "# Avg bus bandwidth" | awk '{print $NF}'`, run in a real shell."""
    p = subprocess.run(["sh", "-c", "grep '# Avg bus bandwidth' | awk '{print $NF}'"],
                       input=text, capture_output=True, text=True, timeout=30)
    values = p.stdout.split()
    if len(values) != 1:
        raise AssertionError(f"{len(values)} 'Avg bus bandwidth' lines: {values}")
    return float(values[0])  # a harness that got 'rank0]:' here would raise, or publish 0.0


def split_rows(text):
    """A harness's reading: every line whose first field is a number, split on whitespace."""
    rows = []
    for line in text.splitlines():
        fields = line.split()
        if fields and fields[0].isdigit():
            if len(fields) != 13:
                raise AssertionError(f"a row of {len(fields)} fields: {line!r}")
            rows.append(fields)
    return rows


def first_line_version(text):
    """The nccl-tests version a consumer finds on the first line, or None."""
    m = re.match(r"# nccl-tests version (\S+)", text)
    return m.group(1) if m else None
