#include <sqlite3.h>

/* sqlite3_db_config is variadic, which Swift cannot call: the one setting DeltaSQLite uses.
   The query planner stability guarantee: plans never depend on the values bound to a statement,
   so a statement is not prepared again when they change (a partial index otherwise makes every
   statement whose parameters it might imply be re-prepared at each new binding). */
static inline int deltasnap_sqlite_fix_plans(sqlite3 *db) {
    return sqlite3_db_config(db, SQLITE_DBCONFIG_ENABLE_QPSG, 1, (int *)0);
}
