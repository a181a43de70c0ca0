#pragma once
// What the Hub client's parts share: the Hub's URLs, requests with the token, which failures are worth
// a retry, and the words that explain an HTTP error to the user. Internal to hub/.
#include <QNetworkReply>
#include <QNetworkRequest>
#include <QString>
#include <QUrl>

#include "hub/hub_client.h"

namespace tandem::hub::detail {

// Why ENDPOINT (resolved) is no address to download from, for the user; empty when it is one: an
// http or https URL with a host.
QString endpointProblem(const QString& endpoint);
// {endpoint}/api/models/{repo}/tree/{revision}?recursive=true; the revision is one path segment
// (a branch "refs/pr/1" is sent as refs%2Fpr%2F1, as the Hub expects).
QUrl treeUrl(const QString& endpoint, const QString& repo, const QString& revision);
// {endpoint}/{repo}/resolve/{revision}/{path}
QUrl resolveUrl(const QString& endpoint, const QString& repo, const QString& revision, const QString& path);

// A GET of URL with our User-Agent and, when TOKEN is not empty and mayCarryToken(URL),
// "Authorization: Bearer TOKEN".
QNetworkRequest makeRequest(const QUrl& url, const QString& token);
// Whether a request to URL may carry the token: https, or plain http to this machine (a local mirror,
// the tests); never plain http over a network, where anyone on the way could read it.
bool mayCarryToken(const QUrl& url);
// Whether a redirect from FROM to TO may carry the token: only to the same scheme, host and port, so
// the token never reaches a CDN (which would also refuse a request with two kinds of credentials).
bool sameOrigin(const QUrl& from, const QUrl& to);

// The reply's HTTP status, 0 when no response arrived.
int httpStatus(const QNetworkReply* reply);
// Network errors, 408, 429 and 5xx are worth another try; 401, 403, 404 and the like are not.
bool worthRetrying(QNetworkReply::NetworkError error, int status);
// The wait before retry ATTEMPT (1, 2, ...): retryDelayMs doubled per attempt, at most a minute.
int backoffMs(const HubSettings& settings, int attempt);
// The error says the Hub cannot be reached at all (no network, a refused connection, a name that does
// not resolve, nothing heard back): a listing, which someone waits for, tries such a one again once only.
bool isUnreachable(QNetworkReply::NetworkError error, int status);
// How long a listing waits for an answer: the stall timeout, at most 15 s.
int listingTimeoutMs(const HubSettings& settings);

// A sentence for the user about a reply that failed for good: for 401/403/404 what it means on the
// Hub and what to do; WHAT names the file, or is empty for the listing.
QString failureMessage(const QNetworkReply* reply, const QString& repo, const QString& revision,
                       const QString& what, bool sentToken);

// "812.4 MB", "12.31 GB": decimal units, as disks are sold.
QString humanBytes(qint64 bytes);

}  // namespace tandem::hub::detail
