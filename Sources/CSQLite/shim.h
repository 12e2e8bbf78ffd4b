#include <sqlite3.h>

// SQLITE_TRANSIENT is a cast macro Swift cannot import: these bind with it, so
// SQLite copies the value before the call returns. An empty blob is bound as a
// zero-length blob, never as NULL (sqlite3_bind_blob with a NULL pointer is a
// NULL), so an empty value reads back as empty.
static inline int csqlite_bind_blob(sqlite3_stmt *statement, int index, const void *bytes, int count) {
    return count == 0 ? sqlite3_bind_zeroblob(statement, index, 0)
                      : sqlite3_bind_blob(statement, index, bytes, count, SQLITE_TRANSIENT);
}

static inline int csqlite_bind_text(sqlite3_stmt *statement, int index, const char *text, int count) {
    return sqlite3_bind_text(statement, index, text, count, SQLITE_TRANSIENT);
}
