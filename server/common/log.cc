#include "server/common/log.h"

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <sys/time.h>

namespace rdmad {
namespace {
std::atomic<int> g_level{static_cast<int>(LogLevel::kInfo)};
}

void SetLogLevel(LogLevel level) { g_level.store(static_cast<int>(level)); }

bool ParseLogLevel(const char* text, LogLevel* level) {
  static const struct { const char* name; LogLevel level; } kLevels[] = {
      {"debug", LogLevel::kDebug}, {"info", LogLevel::kInfo},
      {"warning", LogLevel::kWarning}, {"error", LogLevel::kError}};
  for (const auto& l : kLevels) {
    if (std::strcmp(text, l.name) == 0) {
      *level = l.level;
      return true;
    }
  }
  return false;
}

void Logf(LogLevel level, const char* format, ...) {
  if (static_cast<int>(level) < g_level.load(std::memory_order_relaxed)) return;
  static const char kTags[] = {'D', 'I', 'W', 'E'};
  char message[2048];
  va_list args;
  va_start(args, format);
  std::vsnprintf(message, sizeof message, format, args);
  va_end(args);
  timeval tv;
  gettimeofday(&tv, nullptr);
  tm local;
  gmtime_r(&tv.tv_sec, &local);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &local);
  std::fprintf(stderr, "%c %s.%03ldZ rdmad: %s\n", kTags[static_cast<int>(level)], stamp,
               static_cast<long>(tv.tv_usec / 1000), message);
}

}  // namespace rdmad
