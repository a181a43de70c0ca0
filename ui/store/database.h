#pragma once
// The SQLite file behind the conversation store: opened through Qt SQL, checked, migrated, in WAL mode
// with foreign keys on. A file Tandem cannot use as it is (not a database, damaged, or written by a newer
// Tandem) is reported and never written to.
#include <QSqlDatabase>
#include <QString>
#include <memory>

namespace tandem::ui {

class Database {
public:
    // The schema version this build writes; see migrations.cpp.
    static int latestSchemaVersion();

    struct OpenResult {
        std::unique_ptr<Database> database;  // null when the file cannot be used
        QString problem;                     // why, for the user
    };
    // Opens `path`, creating it (and its folder) when missing, and migrates it to the latest schema.
    static OpenResult open(const QString& path);
    // A database that lives only as long as this object: used when the file cannot be.
    static std::unique_ptr<Database> openInMemory();

    ~Database();
    Database(const Database&) = delete;
    Database& operator=(const Database&) = delete;

    QSqlDatabase connection() const { return QSqlDatabase::database(connectionName_, false); }
    QString path() const { return path_; }
    bool isPersistent() const { return !path_.isEmpty(); }
    int schemaVersion() const;

private:
    Database(QString connectionName, QString path) : connectionName_(std::move(connectionName)), path_(std::move(path)) {}
    // Brings the open connection from its version to the latest; returns an error message or empty.
    QString migrate();

    QString connectionName_;
    QString path_;
};

}  // namespace tandem::ui
