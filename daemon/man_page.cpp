// toolwarden(1), rendered from the --help texts of help.cpp so the two cannot drift: every
// help text appears verbatim in a no-fill block; only the sections a manual has and --help
// has not (files, environment, systemd, an example) are written here.
#include <string>
#include <string_view>

#include "daemon/help.hpp"

namespace toolwarden::daemon {
namespace {

// Plain text to troff: a backslash is \e, a hyphen-minus \- (so options copy and search as
// typed), and a line starting with a control character gets a zero-width \& in front.
std::string troff_text(std::string_view text) {
  std::string out;
  out.reserve(text.size() + text.size() / 8);
  bool line_start = true;
  for (char c : text) {
    if (line_start && (c == '.' || c == '\'')) out += "\\&";
    line_start = c == '\n';
    if (c == '\\') {
      out += "\\e";
    } else if (c == '-') {
      out += "\\-";
    } else {
      out += c;
    }
  }
  return out;
}

void verbatim(std::string& out, std::string_view text) {
  out += ".nf\n";
  out += troff_text(text);
  if (!text.empty() && text.back() != '\n') out += '\n';
  out += ".fi\n";
}

constexpr std::string_view kManualOnly = R"(.SH FILES
.TP
.I $XDG_RUNTIME_DIR/toolwarden/
The runtime dir (mode 0700): \fBadmin.sock\fR, the admin API (mode 0600, the daemon's uid
only), and \fBendpoint.json\fR, written once both listeners are up and removed on a clean
shutdown:
.RS
.nf
{"version":1,"pid":PID,"mcp_url":"http://127.0.0.1:PORT/mcp",
 "admin_socket":"RUNTIME_DIR/admin.sock","started_at":"RFC 3339"}
.fi
.RE
.TP
.I $XDG_STATE_HOME/toolwarden/
The state dir: \fBstore.db\fR (SQLite, WAL; jobs, token digests, the hash\-chained audit
events) and \fBartifacts/\fR.
.TP
.I $XDG_CONFIG_HOME/toolwarden/config.json
The optional config (JSON; unknown keys are an error that names the key; refused when a
symlink or group/world\-writable).
.TP
.I /usr/lib/systemd/user/toolwarden.service
The systemd user unit: \fBType=notify\fR, \fBExecStart=/usr/bin/toolwarden serve\fR.
.TP
.I /usr/lib/systemd/user/toolwarden.socket
The optional socket unit: MCP on the fixed address \fB127.0.0.1:7869\fR.
.SH ENVIRONMENT
.TP
.B TOOLWARDEN_RUNTIME_DIR\fR, \fBTOOLWARDEN_STATE_DIR\fR, \fBTOOLWARDEN_CONFIG
Override the runtime dir, state dir and config file (the flags of the same names win).
.TP
.B XDG_RUNTIME_DIR\fR, \fBXDG_STATE_HOME\fR, \fBXDG_CONFIG_HOME
Where those live by default; without them \fB/tmp/toolwarden\-UID\fR,
\fB~/.local/state/toolwarden\fR and \fB~/.config/toolwarden/config.json\fR.
.TP
.B TOOLWARDEN_TOKEN
The job token that \fBmcp\-config\fR puts into the client's configuration.
.TP
.B NOTIFY_SOCKET
\fBserve\fR sends \fBREADY=1\fR there once it listens, and \fBSTOPPING=1\fR on SIGTERM.
.TP
.B LISTEN_PID\fR, \fBLISTEN_FDS
Socket activation: \fBserve\fR adopts file descriptor 3 as its MCP listener and removes
both variables from its environment.
.SH SYSTEMD
Run the daemon as a user service, started at login, with MCP on an ephemeral port (see
\fBendpoint.json\fR):
.PP
.RS
.nf
systemctl \-\-user enable \-\-now toolwarden.service
.fi
.RE
.PP
With the socket unit as well, MCP stays on the fixed address 127.0.0.1:7869 across
restarts, so the clients' configurations keep working; the service takes the socket's
listener:
.PP
.RS
.nf
systemctl \-\-user enable \-\-now toolwarden.socket toolwarden.service
.fi
.RE
.PP
With the socket alone, the daemon starts on the first MCP connection, which serves jobs that
exist already (they outlive restarts); \fBjob create\fR talks to the admin socket, so it needs
the daemon started first (\fBsystemctl \-\-user start toolwarden.service\fR).
.PP
To use another port, \fBsystemctl \-\-user edit toolwarden.socket\fR and set
\fBListenStream=\fR (empty, to clear the default) followed by
\fBListenStream=127.0.0.1:PORT\fR. The service's hardening (\fBNoNewPrivileges\fR,
\fBLockPersonality\fR, \fBRestrictRealtime\fR, \fBSystemCallArchitectures=native\fR,
\fBUMask=0077\fR) leaves the namespaces the sandbox creates alone.
.SH EXAMPLE
Create a job for a worktree and connect Claude Code to it:
.PP
.RS
.nf
toolwarden job create \-\-worktree ~/src/project \-\-access write \e
    \-\-allow 'src/**' \-\-mcp\-config claude\-code | sh
.fi
.RE
.PP
Revoke it when the agent is done:
.PP
.RS
.nf
toolwarden job revoke JOB_ID
.fi
.RE
.SH SEE ALSO
.BR systemctl (1),
.BR systemd.socket (5),
.BR sd_listen_fds (3),
.BR bwrap (1)
)";

}  // namespace

std::string man_page(std::string_view version) {
  auto topics = help_topics();
  std::string out;
  out += ".\\\" toolwarden(1), generated from daemon/help.cpp by toolwarden_man; do not edit.\n";
  out += ".TH TOOLWARDEN 1 \"\" \"toolwarden ";
  out += version;
  out += "\" \"User Commands\"\n";
  out += ".nh\n.ad l\n";  // no hyphenation, ragged right: option names stay whole
  out += ".SH NAME\n";
  out += "toolwarden \\- policy\\-checked, audited tools for AI agents over MCP\n";
  out += ".SH SYNOPSIS\n";
  out += ".B toolwarden\n.I COMMAND\n.RI [ OPTIONS ]\n";
  out += ".SH DESCRIPTION\n";
  verbatim(out, topics.front().text);
  out += ".SH COMMANDS\n";
  for (const auto& topic : topics.subspan(1)) {
    out += ".SS \"toolwarden ";
    out += topic.name;
    out += "\"\n";
    verbatim(out, topic.text);
  }
  out += ".SH COMMON OPTIONS\n";
  verbatim(out, common_options_help());
  out += kManualOnly;
  return out;
}

}  // namespace toolwarden::daemon
