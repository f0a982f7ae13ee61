"""SQL connectors (`type: sql`): named, parameterised queries and an optional read-only `query`.

`manifest` holds the models, `checker` decides whether model-written SQL is one read-only
statement, `database` runs statements (read-only transactions, timeouts, row caps), `table`
renders rows for the model, and `tools` turns a manifest into `Tool` values.
"""
