// Probe plans and verdicts (SPEC §12): the validated, immutable recipe of one probe, and the
// rule that turns a run into `supports`, `refutes` or `inconclusive`. Pure: no filesystem.
//
// The oracle is never the model. Its `source` says where the expectation comes from; only
// differential_reference, historical_regression, published_specification and user_requirement
// are independent of the model (and need a `reference`). Any other source, e.g.
// model_assertion, is recorded but its runs are always `inconclusive`, as is a run that did not
// complete (timeout, output or resource limit, setup failure, no sandbox) and a witness that
// cannot be trusted whole (a truncated stdout, a witness file that is not a plain file).
#pragma once

#include <boost/json/object.hpp>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "policy/error_code.hpp"
#include "policy/path_rules.hpp"

namespace toolwarden::policy {

enum class Verdict { supports, refutes, inconclusive };
std::string_view to_string(Verdict v);

enum class OracleType { exit_code, stdout_contains, file_sha256 };
std::string_view to_string(OracleType t);

inline constexpr std::string_view kIndependentSources[] = {
    "differential_reference", "historical_regression", "published_specification",
    "user_requirement"};

inline constexpr std::size_t kMaxHypothesisBytes = 4096;
inline constexpr std::size_t kMaxCommandArgs = 256;
inline constexpr std::size_t kMaxCommandBytes = 64 * 1024;  // all arguments together
inline constexpr std::size_t kMaxOverlayFiles = 256;        // fixture and intervention each
inline constexpr std::size_t kMaxOverlayBytes = 8u << 20;   // fixture and intervention together
inline constexpr std::size_t kMaxExpectedBytes = 4096;
inline constexpr std::size_t kMaxReferenceBytes = 2048;
inline constexpr std::size_t kMaxIdBytes = 256;

struct Oracle {
  OracleType type = OracleType::exit_code;
  int expected_exit = 0;      // exit_code
  std::string expected_text;  // stdout_contains: the text; file_sha256: 64 lowercase hex
  std::string path;           // file_sha256: relative to the probe's scratch directory
  std::string source;
  std::string reference;
  Verdict pass_verdict = Verdict::supports;
  Verdict fail_verdict = Verdict::refutes;
  bool independent() const;
};

struct ProbePlan {
  std::string snapshot_id;
  std::string hypothesis;
  std::optional<std::string> claim_id;
  std::vector<std::string> command;
  std::string working_directory = ".";  // relative to the snapshot's root
  Oracle oracle;
  std::map<std::string, std::string> fixture;       // scratch-relative path → content
  std::map<std::string, std::string> intervention;  // snapshot-relative path → content
  std::string policy_id;
  // Pinned when the plan is made: what the plan was validated against.
  std::string snapshot_sha256;
  std::string policy_sha256;
  std::string executable_path;
  std::string executable_sha256;

  /// The canonical plan; its canonical JSON's SHA-256 is the plan digest.
  boost::json::object to_json() const;
};

/// Validates the params of `probe.plan` (SPEC §12): unknown keys → DENIED_ARGUMENTS naming the
/// key; fixture/intervention paths must pass parse_request_path and name nothing sensitive
/// (DENIED_PATH), must not nest in one another (DENIED_ARGUMENTS), and each content is at most
/// `max_file_bytes` (DENIED_SIZE). `snapshot_id` may be absent only when `snapshot_optional`.
Result<ProbePlan> parse_probe_plan(const boost::json::object& params,
                                   const SensitiveNames& sensitive, std::size_t max_file_bytes,
                                   bool snapshot_optional);

/// A stored plan (to_json()) read back; nullopt when it is not one.
std::optional<ProbePlan> plan_from_json(const boost::json::object& stored,
                                        const SensitiveNames& sensitive);

/// What a run left for the oracle to look at.
struct FileWitness {
  enum class Kind { found, missing, unusable } kind = Kind::missing;
  std::string sha256;  // found
  std::string reason;  // unusable: why (symlink, not regular, several links, too large)
};

struct RunFacts {
  std::string state;  // sandbox::to_string(State)
  int exit_code = -1;
  std::string_view stdout_data;
  bool truncated = false;
  std::optional<FileWitness> file;  // file_sha256 only
};

struct Judgement {
  Verdict verdict = Verdict::inconclusive;
  std::optional<bool> oracle_passed;  // unset when the oracle could not be applied
  std::string reason;
  boost::json::object observed;
};

Judgement judge(const Oracle& oracle, const RunFacts& run);

}  // namespace toolwarden::policy
