#include "hub/hub_http.h"

#include <QCoreApplication>
#include <QHostAddress>
#include <QLocale>

#include <algorithm>

namespace tandem::hub::detail {

namespace {

QString encodedSegment(const QString& text) { return QString::fromLatin1(QUrl::toPercentEncoding(text)); }

// Each '/'-separated part percent-encoded, the slashes kept.
QString encodedPath(const QString& path) {
    QStringList parts = path.split('/');
    for (QString& part : parts) part = encodedSegment(part);
    return parts.join('/');
}

QString origin(const QUrl& url) { return url.adjusted(QUrl::RemovePath | QUrl::RemoveQuery | QUrl::RemoveFragment).toString(); }

}  // namespace

QUrl treeUrl(const QString& endpoint, const QString& repo, const QString& revision) {
    return QUrl(endpoint + "/api/models/" + encodedPath(repo) + "/tree/" + encodedSegment(revision) +
                    "?recursive=true",
                QUrl::StrictMode);
}

QUrl resolveUrl(const QString& endpoint, const QString& repo, const QString& revision, const QString& path) {
    return QUrl(endpoint + "/" + encodedPath(repo) + "/resolve/" + encodedSegment(revision) + "/" + encodedPath(path),
                QUrl::StrictMode);
}

QString endpointProblem(const QString& endpoint) {
    const QUrl url(endpoint, QUrl::StrictMode);
    if (url.isValid() && (url.scheme() == QLatin1String("https") || url.scheme() == QLatin1String("http")) &&
        !url.host().isEmpty())
        return {};
    return QStringLiteral("'%1' is not an address to download from: write it as https://huggingface.co or a mirror's "
                          "https:// address (Settings > Downloads, or HF_ENDPOINT).").arg(endpoint);
}

QNetworkRequest makeRequest(const QUrl& url, const QString& token) {
    QNetworkRequest request(url);
    request.setHeader(QNetworkRequest::UserAgentHeader, QStringLiteral("tandem/%1 (Qt Network)")
                                                           .arg(QCoreApplication::applicationVersion()));
    if (!token.isEmpty() && mayCarryToken(url)) request.setRawHeader("Authorization", "Bearer " + token.toUtf8());
    // Redirects are followed by hand (see sameOrigin); the listing does the same through Qt's policy.
    request.setAttribute(QNetworkRequest::RedirectPolicyAttribute, QNetworkRequest::ManualRedirectPolicy);
    // Weights do not compress, and a compressed body would make Content-Length and Range meaningless.
    request.setRawHeader("Accept-Encoding", "identity");
    return request;
}

bool mayCarryToken(const QUrl& url) {
    if (url.scheme() == QLatin1String("https")) return true;
    if (url.scheme() != QLatin1String("http")) return false;
    const QString host = url.host();
    return host.compare(QLatin1String("localhost"), Qt::CaseInsensitive) == 0 || QHostAddress(host).isLoopback();
}

bool sameOrigin(const QUrl& from, const QUrl& to) {
    return from.scheme() == to.scheme() && from.host().compare(to.host(), Qt::CaseInsensitive) == 0 &&
           from.port(from.scheme() == "https" ? 443 : 80) == to.port(to.scheme() == "https" ? 443 : 80);
}

int httpStatus(const QNetworkReply* reply) {
    return reply->attribute(QNetworkRequest::HttpStatusCodeAttribute).toInt();
}

bool worthRetrying(QNetworkReply::NetworkError error, int status) {
    if (status == 408 || status == 429 || status >= 500) return true;
    if (status != 0) return false;
    switch (error) {
    case QNetworkReply::ConnectionRefusedError:
    case QNetworkReply::RemoteHostClosedError:
    case QNetworkReply::HostNotFoundError:  // often a resolver hiccup; a wrong endpoint fails after the retries
    case QNetworkReply::TimeoutError:
    case QNetworkReply::OperationCanceledError:  // the listing's transfer timeout; a download's own aborts never get here
    case QNetworkReply::TemporaryNetworkFailureError:
    case QNetworkReply::NetworkSessionFailedError:
    case QNetworkReply::ProxyConnectionClosedError:
    case QNetworkReply::ProxyTimeoutError:
    case QNetworkReply::UnknownNetworkError:
    case QNetworkReply::UnknownProxyError:
    case QNetworkReply::ProtocolFailure:
    case QNetworkReply::SslHandshakeFailedError:
        return true;
    default:
        return false;
    }
}

bool isUnreachable(QNetworkReply::NetworkError error, int status) {
    if (status != 0) return false;
    switch (error) {
    case QNetworkReply::ConnectionRefusedError:
    case QNetworkReply::HostNotFoundError:
    case QNetworkReply::TimeoutError:
    case QNetworkReply::OperationCanceledError:
    case QNetworkReply::TemporaryNetworkFailureError:
    case QNetworkReply::NetworkSessionFailedError:
    case QNetworkReply::UnknownNetworkError:
    case QNetworkReply::ProxyConnectionRefusedError:
    case QNetworkReply::ProxyNotFoundError:
    case QNetworkReply::ProxyTimeoutError:
        return true;
    default:
        return false;
    }
}

int listingTimeoutMs(const HubSettings& settings) { return std::min(settings.stallTimeoutMs, 15000); }

int backoffMs(const HubSettings& settings, int attempt) {
    const qint64 delay = static_cast<qint64>(settings.retryDelayMs) << std::min(attempt - 1, 20);
    return static_cast<int>(std::min<qint64>(delay, 60000));
}

QString failureMessage(const QNetworkReply* reply, const QString& repo, const QString& revision, const QString& what,
                       bool sentToken) {
    const int status = httpStatus(reply);
    const QString code = QString::fromUtf8(reply->rawHeader("X-Error-Code"));
    const QString site = origin(reply->request().url());
    const QString tokenHelp = QStringLiteral(
        "Create an access token at %1/settings/tokens and give it to Tandem (tandem-cli --token, the HF_TOKEN "
        "variable, or the Hugging Face token in the app's settings).").arg(site);
    if (status == 401) {
        if (!sentToken)
            return QStringLiteral("%1 needs you to sign in: it is private or gated, or no repository has that name. %2")
                .arg(repo, tokenHelp);
        return QStringLiteral("The Hub did not accept the token for %1: the token is invalid or expired, or the "
                              "repository does not exist (a private repository looks like a missing one). Check the "
                              "name, and the token at %2/settings/tokens.").arg(repo, site);
    }
    if (status == 403) {
        QString text = QStringLiteral("%1 is gated and this account has not been granted access. Open %2/%1 while "
                                      "signed in, accept the conditions (some authors review each request), then try "
                                      "again").arg(repo, site);
        return sentToken ? text + " with a token of the same account." : text + ". " + tokenHelp;
    }
    if (status == 404) {
        if (code == "RevisionNotFound")
            return QStringLiteral("%1 has no branch, tag or commit '%2'. Check the revision.").arg(repo, revision);
        if (!what.isEmpty() && code != "RepoNotFound")
            return QStringLiteral("%1 has no file '%2' at revision '%3'; the repository may have changed since it was "
                                  "listed. List it again and retry.").arg(repo, what, revision);
        return QStringLiteral("No repository '%1' on %2. Check the name (owner/name, as in the model page's address).")
            .arg(repo, site);
    }
    const QString subject = what.isEmpty() ? QStringLiteral("listing %1").arg(repo) : what;
    if (status != 0)
        return QStringLiteral("The Hub answered HTTP %1 (%2) for %3. Try again later.")
            .arg(status)
            .arg(reply->attribute(QNetworkRequest::HttpReasonPhraseAttribute).toString(), subject);
    return QStringLiteral("Could not reach %1 for %2: %3. Check the internet connection, a proxy, or the endpoint "
                          "setting (HF_ENDPOINT).").arg(reply->request().url().host(), subject, reply->errorString());
}

QString humanBytes(qint64 bytes) { return QLocale::c().formattedDataSize(bytes, 2, QLocale::DataSizeSIFormat); }

}  // namespace tandem::hub::detail
