// Minimal leveled logging to stderr, one line per event, readable by people and by journald.
// Thread-safety: each call writes one line with a single fprintf; callable from any thread.
#ifndef RDMAD_SERVER_COMMON_LOG_H_
#define RDMAD_SERVER_COMMON_LOG_H_

namespace rdmad {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3 };

void SetLogLevel(LogLevel level);
// Parses "debug", "info", "warning", "error"; false if unknown.
bool ParseLogLevel(const char* text, LogLevel* level);
void Logf(LogLevel level, const char* format, ...) __attribute__((format(printf, 2, 3)));

}  // namespace rdmad

#define RDMAD_LOG_INFO(...) ::rdmad::Logf(::rdmad::LogLevel::kInfo, __VA_ARGS__)
#define RDMAD_LOG_WARN(...) ::rdmad::Logf(::rdmad::LogLevel::kWarning, __VA_ARGS__)
#define RDMAD_LOG_ERROR(...) ::rdmad::Logf(::rdmad::LogLevel::kError, __VA_ARGS__)
#define RDMAD_LOG_DEBUG(...) ::rdmad::Logf(::rdmad::LogLevel::kDebug, __VA_ARGS__)

#endif  // RDMAD_SERVER_COMMON_LOG_H_
