#pragma once
// Where a download keeps its partial data, and how a file is checked: the parts of DownloadJob that
// touch the disk and not the network. Internal to hub/.
#include <QCryptographicHash>
#include <QString>
#include <atomic>
#include <memory>

#include "hub/hub_client.h"

namespace tandem::hub::detail {

// The most bytes a listing may give one file, or a download all of its files together: 2^50 (1.13 PB),
// far above any model and far below where a sum of sizes could overflow.
constexpr qint64 kMaxListedBytes = qint64(1) << 50;

// The folder inside OUTDIR where a download keeps its own state.
inline constexpr char kStagingFolder[] = ".tandem-download";
// OUTDIR/.tandem-download: partial files and the record of verified files, removed once all are in place.
QString stagingDir(const QString& outDir);
// Whether a repository's PATH falls inside the staging folder (or is its name), where it would collide
// with the download's own files. Case-insensitive, as some file systems are.
bool isReservedPath(const QString& path);
// OUTDIR/.tandem-download/PATH.ID.part, where ID is what the file is checked against (its sha256, git
// blob id, or size): a partial of another revision of the file has another name and is never resumed.
QString partialPath(const QString& outDir, const RepoFile& file);
// Removes what FILES left in the staging folder (their partial files, the folders those needed, their
// entries in the record), then the staging folder itself if nothing else is in it: another download
// into the same folder may keep its partial files there.
void clearStaging(const QString& outDir, const QList<RepoFile>& files);
// Why FILE cannot be downloaded safely into OUTDIR: a path outside it, a size that is no byte count
// (negative, or past kMaxListedBytes), a check value that is not the hex digest it should be (it is
// part of the partial file's name), or a partial file that would land outside the staging folder;
// empty when it can. A reserved path (isReservedPath) is the caller's to skip.
QString unsafeFileProblem(const QString& outDir, const RepoFile& file);
// A path from the Hub that stays inside the output folder: relative, no "..", no empty or "." parts.
bool isSafeRelativePath(const QString& path);

// The running check of one file's content: sha256 for LFS files, the git blob id (sha1 over
// "blob SIZE\0" + content) for the others, nothing but the size when the listing gave neither.
class ContentCheck {
public:
    explicit ContentCheck(const RepoFile& file);
    void add(const char* data, qint64 size);
    // The digest in lower-case hex; empty when there is nothing to compare.
    QString result() const;
    QString expected() const { return expected_; }
    QString kind() const { return kind_; }  // "sha256", "git blob id" or ""

private:
    std::unique_ptr<QCryptographicHash> hash_;
    QString expected_;
    QString kind_;
};

// Reads the first BYTES of PATH into CHECK. False when the file is shorter or unreadable, or STOP was
// set while it read (it is polled every 8 MiB).
bool addFileTo(ContentCheck& check, const QString& path, qint64 bytes, const std::atomic<bool>* stop = nullptr);

// The record of files this download verified and moved into place (.tandem-download/verified.json):
// a file found there with the same check value, size and modification time is not hashed again.
class VerifiedRecord {
public:
    explicit VerifiedRecord(QString outDir);
    bool contains(const RepoFile& file) const;
    // Records FILE as in place; false when the record could not be written (the file is then hashed
    // again by a later job, nothing worse).
    bool add(const RepoFile& file);
    // Forgets FILES; the record file goes when nothing is left in it.
    void remove(const QList<RepoFile>& files);

private:
    QString outDir_;
};

}  // namespace tandem::hub::detail
