#include <sqlite3.h>

/* sqlite3_db_config is variadic, which Swift cannot call: the one setting DeltaSQLite uses.
   The query planner stability guarantee: plans never depend on the values bound to a statement,
   so a statement is not prepared again when they change (a partial index otherwise makes every
   statement whose parameters it might imply be re-prepared at each new binding). */
static inline int deltasnap_sqlite_fix_plans(sqlite3 *db) {
    return sqlite3_db_config(db, SQLITE_DBCONFIG_ENABLE_QPSG, 1, (int *)0);
}

/* The first region of the write-ahead log's shared-memory index (https://www.sqlite.org/walformat.html,
   "The WAL-Index Format"), as this connection's VFS maps it: the region stays mapped, at the same
   address, until the connection closes. Returns SQLITE_OK and sets *region, or an error (no WAL,
   a VFS without shared memory, or the region not yet created). */
static inline int deltasnap_sqlite_wal_index(sqlite3 *db, const volatile void **region) {
    sqlite3_file *file = 0;
    int status = sqlite3_file_control(db, "main", SQLITE_FCNTL_FILE_POINTER, &file);
    if (status != SQLITE_OK) return status;
    if (file == 0 || file->pMethods == 0 || file->pMethods->iVersion < 2 || file->pMethods->xShmMap == 0) return SQLITE_NOTFOUND;
    volatile void *mapped = 0;
    status = file->pMethods->xShmMap(file, 0, 32768, 0, &mapped);
    if (status != SQLITE_OK) return status;
    if (mapped == 0) return SQLITE_NOTFOUND;
    *region = mapped;
    return SQLITE_OK;
}

/* The WAL-index header from `region`, read without a lock as SQLite's own readers first read it
   (walIndexTryHdr): its first copy, a barrier, its second copy. A writer writes the second copy
   first, then the first; so equal copies are one whole header, and every commit changes it
   (the frame count, or the salts when the log restarts, and a change counter). Returns 1 and
   the 48 bytes in `out` when the copies are equal and initialised, else 0 (a writer is between
   the two copies: ask SQLite). */
static inline int deltasnap_sqlite_wal_index_header(const volatile void *region, unsigned long long out[6]) {
    const volatile unsigned char *bytes = (const volatile unsigned char *)region;
    unsigned long long first[6], second[6];
    for (int i = 0; i < 48; i++) ((unsigned char *)first)[i] = bytes[i];
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    for (int i = 0; i < 48; i++) ((unsigned char *)second)[i] = bytes[48 + i];
    for (int i = 0; i < 6; i++) if (first[i] != second[i]) return 0;
    if (((const unsigned char *)first)[12] == 0) return 0; /* isInit */
    for (int i = 0; i < 6; i++) out[i] = first[i];
    return 1;
}
