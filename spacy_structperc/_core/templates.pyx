# cython: infer_types=True
"""Feature templates: conjunctions of per-token atoms and previous decisions, hashed to 64 bits.

A template is a list of parts. An atom part `(offset, atom)` reads the atom column `atom` at the
current position plus `offset`; a history part `("hist", k)` reads the k-th previous decision.
The template's index in its set seeds the hash, so equal values under different templates never
collide by construction. A template whose atoms include an absent value (0) fires no feature.
"""
from libc.stdlib cimport calloc, free
import numpy

from .typedefs cimport hash_t, atom_t, class_t, uint64_t



cdef int extract_features(const TemplateC* templates, int n_templates, const atom_t* atoms,
                          int n_tokens, int n_cols, int i, const class_t* hist,
                          hash_t* keys) noexcept nogil:
    cdef int t, p, n = 0
    cdef hash_t h
    cdef atom_t value
    cdef const TemplateC* tpl
    for t in range(n_templates):
        tpl = &templates[t]
        h = tpl.seed
        for p in range(tpl.n_atoms):
            value = atom_at(atoms, n_tokens, n_cols, i + tpl.atom_offset[p], tpl.atom_col[p])
            if value == 0:
                break
            h = hash_combine(h, value)
        else:
            for p in range(tpl.n_hist):
                h = hash_combine(h, history_value(hist[tpl.hist_offset[p] - 1]))
            keys[n] = ((mix64(h) | 1) & ~tpl.key_clear) | tpl.key_set   # never 0 (empty bucket)
            n += 1
    return n


def _seed(int index, str name):
    # Seeds depend on the template's position and name, so reordering a set changes its hashes
    # (the set is saved with the model, which is what makes this safe).
    cdef hash_t h = 0xcbf29ce484222325ULL
    for ch in name.encode("utf8"):
        h = (h ^ <hash_t>ch) * 0x100000001b3ULL
    return mix64(h ^ <hash_t>(index + 1))


cdef class TemplateSet:
    def __cinit__(self, specs, atom_names):
        """specs: list of {"name": str, "parts": [[offset, atom_name] | ["hist", k], ...],
        "tied": bool (optional)}.

        A tied template's features are label-level: with `n_latent` weight columns per label
        (AveragedWeights.tie_width), an update moves all columns of the label together. Keys of
        tied templates have TIED_BIT set; in a set with any tied template, other keys have it
        cleared. Sets without tied templates hash exactly as before.
        """
        self.atom_names = list(atom_names)
        self.n_cols = len(self.atom_names)
        self.specs = [_spec(s) for s in specs]
        any_tied = any(s.get("tied") for s in self.specs)
        col_of = {name: j for j, name in enumerate(self.atom_names)}
        static, history = [], []
        for index, spec in enumerate(self.specs):
            atom_parts, hist_parts = [], []
            for part in spec["parts"]:
                if len(part) != 2:
                    raise ValueError(f"template {spec['name']!r}: part {part!r} is not a pair")
                if part[0] == "hist":
                    k = int(part[1])
                    if not 1 <= k <= MAX_HIST:
                        raise ValueError(
                            f"template {spec['name']!r}: history offset {k} is outside 1..{MAX_HIST}"
                        )
                    hist_parts.append(k)
                else:
                    offset, atom = int(part[0]), part[1]
                    if atom not in col_of:
                        raise ValueError(
                            f"template {spec['name']!r} uses atom {atom!r}, which is not one of "
                            f"{self.atom_names}"
                        )
                    atom_parts.append((offset, col_of[atom]))
            if len(atom_parts) > MAX_PARTS or len(hist_parts) > MAX_PARTS:
                raise ValueError(f"template {spec['name']!r} has more than {MAX_PARTS} parts")
            if not atom_parts and not hist_parts:
                raise ValueError(f"template {spec['name']!r} has no parts")
            tied = bool(spec.get("tied"))
            if tied and hist_parts:
                raise ValueError(f"template {spec['name']!r}: only templates without history parts can be tied")
            tied_bit = int(TIED_BIT)
            marks = (tied_bit, 0) if tied else ((0, tied_bit) if any_tied else (0, 0))
            entry = (_seed(index, spec["name"]), atom_parts, hist_parts, marks)
            (history if hist_parts else static).append(entry)
        self.n_static = len(static)
        self.n_history = len(history)
        self.max_history = max([max(h) for _, _, h, _ in history], default=0)
        self.pure_history = all(not atom_parts for _, atom_parts, _, _ in history)
        self.c_static = <TemplateC*>calloc(max(1, self.n_static), sizeof(TemplateC))
        self.c_history = <TemplateC*>calloc(max(1, self.n_history), sizeof(TemplateC))
        if self.c_static == NULL or self.c_history == NULL:
            raise MemoryError()
        _fill(self.c_static, static)
        _fill(self.c_history, history)

    def __dealloc__(self):
        free(self.c_static)
        free(self.c_history)

    def __reduce__(self):
        return (TemplateSet, (self.specs, self.atom_names))

    def __len__(self):
        return len(self.specs)

    def static_keys(self, atoms, int i):
        """The static feature keys at position i (for tests and debugging)."""
        return self._keys(atoms, i, None, True)

    def history_keys(self, atoms, int i, hist):
        """The history feature keys at position i, hist[0] being the previous decision."""
        return self._keys(atoms, i, hist, False)

    def _keys(self, atoms, int i, hist, bint static):
        cdef uint64_t[:, ::1] a = numpy.ascontiguousarray(atoms, dtype=numpy.uint64).reshape((-1, self.n_cols))
        cdef class_t h[MAX_HIST]
        cdef int k
        for k in range(MAX_HIST):
            h[k] = hist[k] if hist is not None and k < len(hist) else -1
        out = numpy.zeros((max(self.n_static, self.n_history) + 1,), dtype=numpy.uint64)
        cdef uint64_t[::1] o = out
        cdef int n
        cdef const atom_t* ptr = &a[0, 0] if a.shape[0] else NULL
        if static:
            n = extract_features(self.c_static, self.n_static, ptr, a.shape[0], self.n_cols, i, h, &o[0])
        else:
            n = extract_features(self.c_history, self.n_history, ptr, a.shape[0], self.n_cols, i, h, &o[0])
        return out[:n]


def _spec(s):
    spec = dict(name=str(s["name"]), parts=[list(p) for p in s["parts"]])
    if s.get("tied"):
        spec["tied"] = True
    return spec


cdef void _fill(TemplateC* dest, entries):
    cdef int t, p
    for t, (seed, atom_parts, hist_parts, marks) in enumerate(entries):
        dest[t].seed = seed
        dest[t].key_set = marks[0]
        dest[t].key_clear = marks[1]
        dest[t].n_atoms = len(atom_parts)
        for p, (offset, col) in enumerate(atom_parts):
            dest[t].atom_offset[p] = offset
            dest[t].atom_col[p] = col
        dest[t].n_hist = len(hist_parts)
        for p, k in enumerate(hist_parts):
            dest[t].hist_offset[p] = k
