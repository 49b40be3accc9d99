"""Small C++ helpers of the automata layer, compiled with the system compiler at first use and loaded with ctypes.

The sources are plain C++ with an ``extern "C"`` interface (no Python or numpy headers). A library is built once
per source and compiler into ``$KLEENE_CACHE/automata`` (default ``~/.cache/kleene/automata``), compiled into a
private temporary file and renamed into place, so concurrent first uses are safe. ``library()`` returns None when
no compiler is found, the build fails, or ``KLEENE_NO_NATIVE`` is set to a non-empty value: every caller then
takes its pure-Python path (the results are the same; only the speed differs).

This module is the bottom layer's own builder on purpose: ``kleene.compile`` (the kernel builder) sits above
``kleene.automata`` and must not be imported from here.

The AT&T scanner (``att_scan``, ``att_fill``) reads the common case of an acceptor file in bulk: lines of
``src dst label [weight]`` and ``state [weight]`` with decimal states and labels and decimal or ``inf``/
``Infinity`` weights, fields separated by spaces or tabs, ``\\r\\n`` or ``\\n`` line ends. On anything else it
reports the line and the caller reads the text with the general (validating) reader, which names the problem.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np

ATT_SOURCE = r"""
#include <cstdint>
#include <cstdlib>
#include <cmath>

namespace {

// Scanner status codes (the first line number that the fast path does not read goes to info[4]).
enum { OK = 0, UNSUPPORTED = 1 };

static const double POW10[23] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
                                 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

inline bool is_digit(char c) { return c >= '0' && c <= '9'; }
inline bool is_sep(char c) { return c == ' ' || c == '\t'; }
inline char lower(char c) { return (c >= 'A' && c <= 'Z') ? char(c - 'A' + 'a') : c; }

// A token of only digits, as a non-negative integer below 2^31 (false otherwise).
inline bool parse_id(const char* p, const char* e, int64_t* out) {
    if (p == e) return false;
    int64_t v = 0;
    for (; p < e; ++p) {
        if (!is_digit(*p)) return false;
        v = v * 10 + (*p - '0');
        if (v > 2147483646) return false;
    }
    *out = v;
    return true;
}

inline bool matches_word(const char* p, const char* e, const char* word) {
    for (; *word; ++word, ++p) {
        if (p == e || lower(*p) != *word) return false;
    }
    return p == e;
}

// A weight token: [+-]? (digits [. digits*] | . digits) ([eE] [+-]? digits)?, or [+-]? inf|infinity (any case).
// Correctly rounded: the exact fast path (mantissa < 2^53, |power of ten| <= 22) or strtod on a copy.
inline bool parse_weight(const char* p, const char* e, double* out) {
    const char* start = p;
    bool negative = false;
    if (p < e && (*p == '+' || *p == '-')) { negative = *p == '-'; ++p; }
    if (matches_word(p, e, "inf") || matches_word(p, e, "infinity")) {
        *out = negative ? -INFINITY : INFINITY;
        return true;
    }
    uint64_t mantissa = 0;
    int digits = 0, scale = 0, int_digits = 0, frac_digits = 0;
    for (; p < e && is_digit(*p); ++p, ++int_digits) {
        if (mantissa == 0 && *p == '0') continue;  // leading zeros carry no precision
        if (digits < 19) { mantissa = mantissa * 10 + uint64_t(*p - '0'); ++digits; } else { ++scale; }
    }
    if (p < e && *p == '.') {
        ++p;
        for (; p < e && is_digit(*p); ++p, ++frac_digits) {
            if (mantissa == 0 && *p == '0') { --scale; continue; }
            if (digits < 19) { mantissa = mantissa * 10 + uint64_t(*p - '0'); ++digits; --scale; }
        }
    }
    if (int_digits + frac_digits == 0) return false;
    int exponent = 0;
    if (p < e && (*p == 'e' || *p == 'E')) {
        ++p;
        bool exp_negative = false;
        if (p < e && (*p == '+' || *p == '-')) { exp_negative = *p == '-'; ++p; }
        if (p == e) return false;
        for (; p < e; ++p) {
            if (!is_digit(*p)) return false;
            if (exponent < 100000) exponent = exponent * 10 + (*p - '0');
        }
        if (exp_negative) exponent = -exponent;
    }
    if (p != e) return false;
    int power = scale + exponent;
    double value;
    if (mantissa == 0) {
        value = 0.0;
    } else if (mantissa < (uint64_t(1) << 53) && power >= -22 && power <= 22) {
        value = double(mantissa);
        value = power < 0 ? value / POW10[-power] : value * POW10[power];
    } else {
        char buffer[128];
        long length = long(e - start);
        if (length >= 127) return false;
        for (long i = 0; i < length; ++i) buffer[i] = start[i];
        buffer[length] = 0;
        *out = std::strtod(buffer, nullptr);
        return true;
    }
    *out = negative ? -value : value;
    return true;
}

// One line's fields (at most 5 are kept; more mark the line unsupported).
struct Fields {
    const char* begin[5];
    const char* end[5];
    int count;
};

// Splits [p, line_end) at spaces and tabs; false when a byte other than those, or printable ASCII, occurs.
inline bool split(const char* p, const char* line_end, Fields* f) {
    f->count = 0;
    while (p < line_end) {
        while (p < line_end && is_sep(*p)) ++p;
        if (p == line_end) break;
        const char* q = p;
        while (q < line_end && !is_sep(*q)) {
            unsigned char c = (unsigned char)*q;
            if (c <= 32 || c >= 127) return false;
            ++q;
        }
        if (f->count == 5) return false;
        f->begin[f->count] = p;
        f->end[f->count] = q;
        ++f->count;
        p = q;
    }
    return true;
}

// The visitor gets (line number, fields) of each non-blank line; returns false to stop with that line unsupported.
template <class Visit>
int64_t each_line(const char* text, int64_t size, Visit visit) {
    const char* p = text;
    const char* end = text + size;
    int64_t number = 0;
    Fields f;
    while (p < end) {
        ++number;
        const char* nl = p;
        while (nl < end && *nl != '\n') ++nl;
        const char* line_end = nl;
        if (line_end > p && line_end[-1] == '\r') {
            if (nl == end) return number;  // a carriage return not before a newline
            --line_end;
        }
        if (!split(p, line_end, &f)) return number;
        if (f.count && !visit(number, f)) return number;
        p = nl + 1;
    }
    return 0;
}

}  // namespace

extern "C" {

// Pass 1. info: [arc lines, final lines, largest state id, start state id, unsupported line (0: none)].
// ambiguous4: reject a 4-field line whose weight is an integer equal to its label (it could be a transducer arc).
int64_t att_scan(const char* text, int64_t size, int64_t ambiguous4, int64_t* info) {
    int64_t arcs = 0, finals = 0, largest = -1, start = -1;
    int64_t bad = each_line(text, size, [&](int64_t, const Fields& f) {
        int64_t a, b, label;
        double w;
        if (f.count > 4) return false;
        if (!parse_id(f.begin[0], f.end[0], &a)) return false;
        if (start < 0) start = a;
        if (a > largest) largest = a;
        if (f.count <= 2) {
            if (f.count == 2 && !parse_weight(f.begin[1], f.end[1], &w)) return false;
            if (f.count == 2 && std::isnan(w)) return false;
            ++finals;
            return true;
        }
        if (!parse_id(f.begin[1], f.end[1], &b) || !parse_id(f.begin[2], f.end[2], &label)) return false;
        if (b > largest) largest = b;
        if (f.count == 4) {
            if (!parse_weight(f.begin[3], f.end[3], &w) || std::isnan(w)) return false;
            int64_t as_label;
            if (ambiguous4 && parse_id(f.begin[3], f.end[3], &as_label) && as_label == label) return false;
        }
        ++arcs;
        return true;
    });
    info[0] = arcs;
    info[1] = finals;
    info[2] = largest;
    info[3] = start;
    info[4] = bad;
    return bad ? UNSUPPORTED : OK;
}

// Pass 2: count[id + 1] += the arcs leaving state id, seen[id] = 1 for every state id that occurs; count (largest
// id + 2 entries) and seen (largest id + 1) are zeroed by the caller. Then count becomes its prefix sum, the CSR
// pointer over raw ids.
int64_t att_count(const char* text, int64_t size, int64_t* count, uint8_t* seen, int64_t largest) {
    int64_t bad = each_line(text, size, [&](int64_t, const Fields& f) {
        int64_t a, b;
        parse_id(f.begin[0], f.end[0], &a);
        seen[a] = 1;
        if (f.count >= 3) {
            parse_id(f.begin[1], f.end[1], &b);
            seen[b] = 1;
            ++count[a + 1];
        }
        return true;
    });
    for (int64_t i = 1; i <= largest + 1; ++i) count[i] += count[i - 1];
    return bad;
}

// Pass 3: the arcs in CSR order (stable by source: file order within a state) and the final lines in file order.
// cursor[id] is where the next arc of state id goes (the CSR pointer over raw ids, advanced in place); index[id] the
// state's dense index (null: ids are dense, the index is the id). A missing weight is written as NaN (the caller puts
// the semiring's one there).
int64_t att_fill(const char* text, int64_t size, int64_t* cursor, const int32_t* index, int32_t* src, int32_t* dst,
                 int32_t* label, double* weight, int32_t* arc_id, int32_t* final_state, double* final_weight) {
    int64_t arc = 0, fin = 0;
    return each_line(text, size, [&](int64_t, const Fields& f) {
        int64_t a, b, lab;
        double w = NAN;
        parse_id(f.begin[0], f.end[0], &a);
        if (f.count <= 2) {
            if (f.count == 2) parse_weight(f.begin[1], f.end[1], &w);
            final_state[fin] = index ? index[a] : int32_t(a);
            final_weight[fin] = w;
            ++fin;
            return true;
        }
        parse_id(f.begin[1], f.end[1], &b);
        parse_id(f.begin[2], f.end[2], &lab);
        if (f.count == 4) parse_weight(f.begin[3], f.end[3], &w);
        int64_t at = cursor[a]++;
        src[at] = index ? index[a] : int32_t(a);
        dst[at] = index ? index[b] : int32_t(b);
        label[at] = int32_t(lab);
        weight[at] = w;
        arc_id[at] = int32_t(arc++);
        return true;
    });
}

}  // extern "C"
"""

FLAGS = ("-O2", "-shared", "-fPIC", "-std=c++17")


def _cache_dir() -> Path:
    root = os.environ.get("KLEENE_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "kleene")
    return Path(root) / "automata"


_LOADED: dict[str, ctypes.CDLL | None] = {}


def library(source: str = ATT_SOURCE) -> ctypes.CDLL | None:
    """The compiled ``source`` (built into the cache at first use), or None without a working C++ compiler or with
    ``KLEENE_NO_NATIVE`` set."""
    if os.environ.get("KLEENE_NO_NATIVE"):
        return None
    compiler = os.environ.get("CXX") or "g++"
    key = hashlib.sha256("\0".join((source, compiler, *FLAGS)).encode()).hexdigest()[:24]
    if key in _LOADED:
        return _LOADED[key]
    lib: ctypes.CDLL | None = None
    path = _cache_dir() / f"automata_{key}.so"
    try:
        if not path.exists():
            if shutil.which(compiler) is None:
                raise OSError(f"no compiler {compiler}")
            path.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryDirectory(dir=path.parent) as tmp:
                cpp, so = Path(tmp) / "source.cpp", Path(tmp) / "lib.so"
                cpp.write_text(source)
                subprocess.run([compiler, *FLAGS, str(cpp), "-o", str(so)], check=True, capture_output=True,
                               timeout=120)
                os.replace(so, path)
        lib = ctypes.CDLL(str(path))
    except (OSError, subprocess.SubprocessError):
        lib = None
    _LOADED[key] = lib
    return lib


_P = ctypes.c_void_p
_I = ctypes.c_int64


def _ptr(array: np.ndarray) -> int:
    assert array.flags.c_contiguous
    return int(array.ctypes.data)


def _text_buffer(text: str) -> tuple[int, int]:
    """The address and length of ``text``'s UTF-8 bytes, without a copy for ASCII text (CPython shares them)."""
    get = ctypes.pythonapi.PyUnicode_AsUTF8AndSize
    get.restype = _P
    get.argtypes = [ctypes.py_object, ctypes.POINTER(ctypes.c_ssize_t)]
    size = ctypes.c_ssize_t()
    address = get(text, ctypes.byref(size))
    return int(address), int(size.value)


class AttArrays:
    """An AT&T acceptor file as arrays (see ``scan_att``): arcs in CSR order over dense state indices."""

    def __init__(self, ids: np.ndarray | int, start: int, indptr: np.ndarray, src: np.ndarray, dst: np.ndarray,
                 label: np.ndarray, weight: np.ndarray, arc_id: np.ndarray, final_state: np.ndarray,
                 final_weight: np.ndarray):
        self.ids, self.start, self.indptr = ids, start, indptr
        self.src, self.dst, self.label, self.weight, self.arc_id = src, dst, label, weight, arc_id
        self.final_state, self.final_weight = final_state, final_weight


def scan_att(text: str, ambiguous4: bool) -> AttArrays | None:
    """The arrays of ``text`` when the compiled scanner reads all of it (see the module docstring), else None.

    ``ids`` are the file's state ids ascending (state k is ``ids[k]``), or their count when they are 0..n-1;
    ``label`` holds the file's label integers; a NaN weight is a missing one. With ``ambiguous4``, a 4-field line
    whose weight is an integer equal to its label makes the scan fail (the general reader decides between acceptor
    and transducer columns).
    """
    if not text.isascii():
        return None
    lib = library()
    if lib is None:
        return None
    address, size = _text_buffer(text)
    info = np.zeros(5, dtype=np.int64)
    lib.att_scan.restype = _I
    lib.att_scan.argtypes = [_P, _I, _I, _P]
    if lib.att_scan(address, size, int(ambiguous4), _ptr(info)) != 0:
        return None
    arcs, finals, largest, start = (int(x) for x in info[:4])
    if largest < 0 or largest > 8 * (arcs + finals) + (1 << 20):  # no lines, or ids too sparse for direct tables
        return None
    count = np.zeros(largest + 2, dtype=np.int64)
    seen = np.zeros(largest + 1, dtype=np.uint8)
    lib.att_count.restype = _I
    lib.att_count.argtypes = [_P, _I, _P, _P, _I]
    lib.att_count(address, size, _ptr(count), _ptr(seen), largest)
    present = seen.view(bool)
    if present.all():  # state ids 0..largest: the raw pointer is the CSR pointer and the index the identity
        ids: np.ndarray | int = largest + 1
        index: np.ndarray | None = None
        indptr = count
        start_index = start
    else:
        ids = np.flatnonzero(present).astype(np.int32)
        index = np.cumsum(present, dtype=np.int32)
        index -= 1
        indptr = np.append(count[ids], count[-1])
        start_index = int(index[start])
    del seen, present
    cursor = count[:-1].copy()
    src = np.empty(arcs, dtype=np.int32)
    dst = np.empty(arcs, dtype=np.int32)
    label = np.empty(arcs, dtype=np.int32)
    weight = np.empty(arcs, dtype=np.float64)
    arc_id = np.empty(arcs, dtype=np.int32)
    final_state = np.empty(finals, dtype=np.int32)
    final_weight = np.empty(finals, dtype=np.float64)
    lib.att_fill.restype = _I
    lib.att_fill.argtypes = [_P, _I, *[_P] * 9]
    lib.att_fill(address, size, _ptr(cursor), None if index is None else _ptr(index), *(_ptr(a) for a in (
        src, dst, label, weight, arc_id, final_state, final_weight)))
    return AttArrays(ids, start_index, indptr, src, dst, label, weight, arc_id, final_state, final_weight)
