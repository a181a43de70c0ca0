#include "ui/store/database.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QSqlError>
#include <QSqlQuery>
#include <atomic>

#include "ui/store/migrations.h"

namespace tandem::ui {
namespace {

QString newConnectionName() {
    static std::atomic<int> counter{0};
    return QStringLiteral("tandem-store-%1").arg(++counter);
}

// A file with content that does not start like an SQLite database is not opened by SQLite at all.
bool looksLikeSqlite(const QString& path, QString* problem) {
    QFile file(path);
    if (!file.exists() || file.size() == 0) return true;
    if (!file.open(QIODevice::ReadOnly)) {
        *problem = QStringLiteral("cannot be read (%1)").arg(file.errorString());
        return false;
    }
    const QByteArray header = file.read(100);
    if (header.size() < 100 || !header.startsWith(QByteArrayLiteral("SQLite format 3\0"))) {
        *problem = QStringLiteral("is not an SQLite database; it may be damaged");
        return false;
    }
    return true;
}

QString pragmaValue(const QSqlDatabase& db, const QString& pragma, QString* error) {
    QSqlQuery q(db);
    if (!q.exec(QStringLiteral("PRAGMA ") + pragma) || !q.next()) {
        *error = q.lastError().text();
        return {};
    }
    return q.value(0).toString();
}

QString explain(const QString& path, const QString& problem) {
    return QStringLiteral("The conversation database %1 %2. Tandem has not changed it; conversations you have now "
                          "are kept only until you quit. To start afresh, move the file elsewhere and restart "
                          "Tandem.")
        .arg(QDir::toNativeSeparators(path), problem);
}

}  // namespace

int Database::latestSchemaVersion() { return static_cast<int>(migrations().size()); }

Database::OpenResult Database::open(const QString& path) {
    QString problem;
    if (!looksLikeSqlite(path, &problem)) return {nullptr, explain(path, problem)};
    if (!QDir().mkpath(QFileInfo(path).absolutePath()))
        return {nullptr, explain(path, QStringLiteral("cannot be created: its folder cannot be made"))};

    const QString name = newConnectionName();
    std::unique_ptr<Database> db(new Database(name, path));
    {
        QSqlDatabase c = QSqlDatabase::addDatabase(QStringLiteral("QSQLITE"), name);
        c.setDatabaseName(path);
        c.setConnectOptions(QStringLiteral("QSQLITE_BUSY_TIMEOUT=2000"));
        if (!c.open()) return {nullptr, explain(path, QStringLiteral("cannot be opened (%1)").arg(c.lastError().text()))};

        // Read-only checks first: nothing is written until the file is known to be ours and readable.
        QString error;
        const QString version = pragmaValue(c, QStringLiteral("user_version"), &error);
        if (!error.isEmpty()) return {nullptr, explain(path, QStringLiteral("cannot be read (%1)").arg(error))};
        if (version.toInt() > latestSchemaVersion())
            return {nullptr, explain(path, QStringLiteral("was written by a newer version of Tandem (schema %1; this "
                                                          "version knows up to %2). Update Tandem to open it")
                                               .arg(version).arg(latestSchemaVersion()))};
        const QString check = pragmaValue(c, QStringLiteral("quick_check"), &error);
        if (!error.isEmpty() || check != QLatin1String("ok"))
            return {nullptr, explain(path, QStringLiteral("is damaged (%1)").arg(error.isEmpty() ? check : error))};

        // WAL: a crash never leaves a half-written transaction, and readers do not block the writer.
        // synchronous=FULL makes each committed batch of a streaming answer survive a power cut too.
        const QString mode = pragmaValue(c, QStringLiteral("journal_mode = WAL"), &error);
        if (mode.compare(QLatin1String("wal"), Qt::CaseInsensitive) != 0)
            return {nullptr, explain(path, QStringLiteral("cannot use write-ahead logging (%1)").arg(error.isEmpty() ? mode : error))};
        QSqlQuery(c).exec(QStringLiteral("PRAGMA synchronous = FULL"));
        QSqlQuery(c).exec(QStringLiteral("PRAGMA foreign_keys = ON"));
    }
    if (const QString error = db->migrate(); !error.isEmpty())
        return {nullptr, explain(path, QStringLiteral("could not be updated to the current schema (%1)").arg(error))};
    return {std::move(db), {}};
}

std::unique_ptr<Database> Database::openInMemory() {
    const QString name = newConnectionName();
    std::unique_ptr<Database> db(new Database(name, {}));
    {
        QSqlDatabase c = QSqlDatabase::addDatabase(QStringLiteral("QSQLITE"), name);
        c.setDatabaseName(QStringLiteral(":memory:"));
        c.open();
        QSqlQuery(c).exec(QStringLiteral("PRAGMA foreign_keys = ON"));
    }
    db->migrate();
    return db;
}

Database::~Database() {
    {
        QSqlDatabase c = connection();
        if (c.isOpen()) c.close();
    }
    QSqlDatabase::removeDatabase(connectionName_);
}

int Database::schemaVersion() const {
    QString error;
    return pragmaValue(connection(), QStringLiteral("user_version"), &error).toInt();
}

QString Database::migrate() {
    QSqlDatabase c = connection();
    const auto& steps = migrations();
    for (int version = schemaVersion(); version < static_cast<int>(steps.size()); ++version) {
        if (!c.transaction()) return c.lastError().text();
        QSqlQuery q(c);
        for (const QString& statement : steps[static_cast<std::size_t>(version)].statements) {
            if (!q.exec(statement)) {
                const QString error = q.lastError().text();
                c.rollback();
                return error;
            }
        }
        // PRAGMA takes no bound parameters; the version is a number we produce.
        if (!q.exec(QStringLiteral("PRAGMA user_version = %1").arg(version + 1)) || !c.commit()) {
            const QString error = c.lastError().text();
            c.rollback();
            return error;
        }
    }
    return {};
}

}  // namespace tandem::ui
