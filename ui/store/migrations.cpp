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
        // Versions (issue 24): an edited question or a regenerated answer is a new message beside the old
        // one, with the same parent; `active` marks the version shown at each place. `position` stays the
        // order of writing, unique per conversation. Today's conversations become a chain in that order.
        {"message versions (a tree of messages), messages left out of an answer's prompt",
         {
             QStringLiteral("ALTER TABLE messages ADD COLUMN parent_id INTEGER REFERENCES messages (id) ON DELETE CASCADE"),
             QStringLiteral("ALTER TABLE messages ADD COLUMN active INTEGER NOT NULL DEFAULT 1"),
             QStringLiteral("ALTER TABLE messages ADD COLUMN omitted_messages INTEGER NOT NULL DEFAULT 0"),
             QStringLiteral("UPDATE messages SET parent_id = (SELECT p.id FROM messages p"
                            " WHERE p.conversation_id = messages.conversation_id AND p.position < messages.position"
                            " ORDER BY p.position DESC LIMIT 1)"),
             QStringLiteral("CREATE INDEX messages_by_parent ON messages (parent_id)"),
         }},
    };
    return steps;
}

}  // namespace tandem::ui
