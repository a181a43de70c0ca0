#include "ui/store/migrations.h"

namespace tandem::ui {

const std::vector<Migration>& migrations() {
    static const std::vector<Migration> steps{
        {"conversations, messages, full-text search",
         {
             QStringLiteral("CREATE TABLE conversations ("
                            " id INTEGER PRIMARY KEY,"
                            " title TEXT NOT NULL,"
                            " created_at INTEGER NOT NULL,"  // milliseconds since the epoch, UTC
                            " updated_at INTEGER NOT NULL,"
                            " settings TEXT NOT NULL DEFAULT '{}')"),
             QStringLiteral("CREATE INDEX conversations_by_update ON conversations (updated_at DESC)"),
             QStringLiteral("CREATE TABLE messages ("
                            " id INTEGER PRIMARY KEY,"
                            " conversation_id INTEGER NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,"
                            " position INTEGER NOT NULL,"
                            " role TEXT NOT NULL CHECK (role IN ('system', 'user', 'assistant')),"
                            " content TEXT NOT NULL DEFAULT '',"
                            " reasoning TEXT NOT NULL DEFAULT '',"
                            " state TEXT NOT NULL DEFAULT 'complete',"
                            " created_at INTEGER NOT NULL,"
                            " updated_at INTEGER NOT NULL,"
                            " model TEXT NOT NULL DEFAULT '',"
                            " prompt_tokens INTEGER NOT NULL DEFAULT 0,"
                            " generated_tokens INTEGER NOT NULL DEFAULT 0,"
                            " tokens_per_second REAL NOT NULL DEFAULT 0,"
                            " first_token_seconds REAL NOT NULL DEFAULT 0,"
                            " error TEXT NOT NULL DEFAULT '',"
                            " UNIQUE (conversation_id, position))"),
             QStringLiteral("CREATE TABLE app_state (key TEXT PRIMARY KEY, value TEXT NOT NULL)"),
             // An external-content FTS5 index over the messages, kept in step by triggers.
             QStringLiteral("CREATE VIRTUAL TABLE message_search USING fts5("
                            " content, reasoning, content='messages', content_rowid='id',"
                            " tokenize='unicode61 remove_diacritics 2')"),
             QStringLiteral("CREATE TRIGGER messages_indexed AFTER INSERT ON messages BEGIN"
                            " INSERT INTO message_search (rowid, content, reasoning)"
                            " VALUES (new.id, new.content, new.reasoning); END"),
             QStringLiteral("CREATE TRIGGER messages_unindexed AFTER DELETE ON messages BEGIN"
                            " INSERT INTO message_search (message_search, rowid, content, reasoning)"
                            " VALUES ('delete', old.id, old.content, old.reasoning); END"),
             QStringLiteral("CREATE TRIGGER messages_reindexed AFTER UPDATE OF content, reasoning ON messages BEGIN"
                            " INSERT INTO message_search (message_search, rowid, content, reasoning)"
                            " VALUES ('delete', old.id, old.content, old.reasoning);"
                            " INSERT INTO message_search (rowid, content, reasoning)"
                            " VALUES (new.id, new.content, new.reasoning); END"),
         }},
    };
    return steps;
}

}  // namespace tandem::ui
