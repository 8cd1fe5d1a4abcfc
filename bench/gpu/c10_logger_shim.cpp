// nvFuser's newest wheels are built against torch 2.10 (nvfuser-cu130-torch210); the device machine
// has torch 2.11.0+cu130, and no nvFuser wheel for torch 2.11 is published. Of the torch symbols
// those wheels use, one is gone from torch 2.11 (nm of nvFuser's libraries against the 2.11.0+cu130
// wheel's: bench/README.md, issue 26): torch 2.11 replaced MessageLogger(const char* file, int line, int
// severity, bool exit_on_fatal) with MessageLogger(SourceLocation, int, bool), and appended a
// SourceLocation member (0x190..0x1a8) that the old, smaller object has no room for.
//
// This library defines the old constructor for nvFuser's log lines only, on the old layout: the
// stream at 0, severity at 0x188, exit_on_fatal at 0x18c, with the prefix torch writes. torch 2.11's
// stream() and destructor read nothing past 0x188 (objdump of its libc10.so), so they work on it.
// gpu_check.py loads it (RTLD_GLOBAL) before nvFuser; it is used on the device machine alone.
#include <cstddef>
#include <cstring>
#include <sstream>

namespace c10 {
class MessageLogger {
 public:
  MessageLogger(const char* file, int line, int severity, bool exit_on_fatal);
  std::stringstream stream_;
  int severity_;
  bool exit_on_fatal_;
};

static_assert(offsetof(MessageLogger, severity_) == 0x188, "torch 2.11's severity_ offset");
static_assert(offsetof(MessageLogger, exit_on_fatal_) == 0x18c, "torch 2.11's exit_on_fatal_ offset");

MessageLogger::MessageLogger(const char* file, int line, int severity, bool exit_on_fatal)
    : severity_(severity), exit_on_fatal_(exit_on_fatal) {
  const char* base = file ? std::strrchr(file, '/') : nullptr;
  stream_ << '[' << (severity >= 0 && severity < 4 ? "IWEF"[severity] : 'V') << ' '
          << (base ? base + 1 : (file ? file : "?")) << ':' << line << "] ";
}
}  // namespace c10
