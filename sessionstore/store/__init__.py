"""The store engine: sessions, numbered records, their derived states, lineage, export.

Rules live here, never in the CLI: a record is written exactly once (its
marker last and atomically), states are derived from the files alone. The
engine reaches stored bytes through the storage seam (`sessionstore.storage`).

- `records`: `Record`, `RecordState`, `RecordWriter`, `read_record`;
- `collection`: `Collection` (listing, allocating numbers);
- `session`: `Session`, `Store` (and the names above, re-exported);
- `files`: the one reader of the store's JSON files and of `constraints.json`;
- `status`: status and progress; `lineage` (+ `lineage_walk`, `lineage_checks`,
  `lineage_info`): `previous/<id>/` copies; `export` (+ `export_dest`: where it may
  not go), `contract`, `wait`.
"""
