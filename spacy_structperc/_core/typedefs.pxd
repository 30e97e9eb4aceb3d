from libc.stdint cimport uint64_t, int32_t, int64_t

ctypedef uint64_t hash_t     # a hashed feature (template id + atom values)
ctypedef uint64_t atom_t     # one per-token observation (e.g. a string hash); 0 means absent
ctypedef float weight_t      # a class weight
ctypedef int32_t class_t     # a label / action id; -1 means none or missing
