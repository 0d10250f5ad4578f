// Egress allowlist (SPEC §11 `network`): host matching, IP literals in every spelling,
// forbidden address ranges, ports, CONNECT targets.
#include "policy/egress.hpp"

#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace toolwarden::policy {
namespace {

EgressAllowlist must_build(const std::vector<std::string>& hosts) {
  std::string err;
  auto list = EgressAllowlist::from_hosts(hosts, &err);
  EXPECT_TRUE(list.has_value()) << err;
  return list.value_or(EgressAllowlist{});
}

IpAddress ip(std::string_view text) {
  auto a = IpAddress::parse(text);
  EXPECT_TRUE(a.has_value()) << text;
  return a.value_or(IpAddress{});
}

const std::vector<std::string> kHosts = {"api.example.com", "*.example.org", "Mixed.Case.NET.",
                                         "203.0.113.7",     "[2001:db8::7]", "10.1.2.3"};

struct HostCase {
  std::string_view host;
  std::uint16_t port;
  bool allowed;
};

TEST(EgressDecideHost, MatchingTable) {
  const auto list = must_build(kHosts);
  const HostCase cases[] = {
      // exact names: case-insensitive, one trailing dot tolerated
      {"api.example.com", 443, true},
      {"API.Example.COM", 443, true},
      {"api.example.com.", 443, true},
      {"api.example.com..", 443, false},
      {"api.example.com", 80, true},
      {"x.api.example.com", 443, false},
      {"example.com", 443, false},
      {"api.example.co", 443, false},
      {"mixed.case.net", 443, true},
      // wildcards: subdomains at any depth, not the apex, not a look-alike
      {"a.example.org", 443, true},
      {"a.b.example.org", 443, true},
      {"A.B.EXAMPLE.ORG.", 443, true},
      {"example.org", 443, false},
      {"evilexample.org", 443, false},
      {"example.org.evil.com", 443, false},
      {".example.org", 443, false},
      // ports: 443 and 80 only
      {"api.example.com", 8443, false},
      {"api.example.com", 22, false},
      {"a.example.org", 0, false},
      // malformed names never reach the resolver
      {"", 443, false},
      {"api example.com", 443, false},
      {"api.example.com\n", 443, false},
      {"api.example.com%00", 443, false},
      {"-api.example.com", 443, false},
      {"a..example.org", 443, false},
      {"a.example.org:443", 443, false},
      {"user@api.example.com", 443, false},
  };
  for (const auto& c : cases) {
    auto d = decide_host(list, c.host, c.port);
    EXPECT_EQ(d.allowed, c.allowed) << "host=" << c.host << " port=" << c.port << ": " << d.reason;
    EXPECT_FALSE(d.reason.empty()) << c.host;
  }
}

TEST(EgressDecideHost, NormalizesTheHostItResolves) {
  const auto list = must_build(kHosts);
  auto d = decide_host(list, "A.B.Example.Org.", 443);
  ASSERT_TRUE(d.allowed);
  EXPECT_EQ(d.host, "a.b.example.org");
  EXPECT_FALSE(d.literal.has_value());
}

TEST(EgressDecideHost, ListedLiteralsAreAllowedExactly) {
  const auto list = must_build(kHosts);
  auto v4 = decide_host(list, "203.0.113.7", 443);
  ASSERT_TRUE(v4.allowed) << v4.reason;
  ASSERT_TRUE(v4.literal.has_value());
  EXPECT_EQ(v4.literal->to_string(), "203.0.113.7");

  auto v6 = decide_host(list, "[2001:db8::7]", 443);
  ASSERT_TRUE(v6.allowed) << v6.reason;
  EXPECT_EQ(v6.host, "2001:db8::7");
  // The same IPv6 address written differently is the same literal.
  EXPECT_TRUE(decide_host(list, "[2001:DB8:0:0::7]", 443).allowed);

  // A listed private literal is the user's explicit choice.
  EXPECT_TRUE(decide_host(list, "10.1.2.3", 80).allowed);
}

TEST(EgressDecideHost, UnlistedLiteralsAreRefused) {
  const auto list = must_build(kHosts);
  for (std::string_view host : {"203.0.113.8", "127.0.0.1", "169.254.169.254", "8.8.8.8", "[::1]",
                                "[2001:db8::8]", "[::ffff:127.0.0.1]"}) {
    auto d = decide_host(list, host, 443);
    EXPECT_FALSE(d.allowed) << host;
    EXPECT_NE(d.reason.find("not listed"), std::string::npos) << host << ": " << d.reason;
  }
}

// Every spelling inet_aton accepts for an address is an IP literal, refused unless it is the
// listed dotted-quad itself: even an odd spelling of a listed address is refused.
TEST(EgressDecideHost, OddIpv4SpellingsAreRefused) {
  const auto list = must_build({"127.0.0.1", "203.0.113.7", "*.example.org"});
  for (std::string_view host :
       {"2130706433", "0x7f000001", "0x7f.1", "127.1", "127.0.1", "017700000001", "0177.0.0.1",
        "127.000.000.001", "0x7F.0.0.1", "127.0.0.1.", "203.0.113.07", "3405803783", "0", "0x",
        "1.2.3.4.5", "999.1.1.1", "1e1", "127.0.0.0x1"}) {
    auto d = decide_host(list, host, 443);
    EXPECT_FALSE(d.allowed) << host << ": " << d.reason;
  }
  EXPECT_TRUE(decide_host(list, "127.0.0.1", 443).allowed);
}

// Cross-check against the C library: whatever inet_aton takes for an address is refused
// unless it is the listed literal itself.
TEST(EgressDecideHost, NothingInetAtonAcceptsSlipsThrough) {
  const auto list = must_build({"1.2.3.4", "*.example.org"});
  std::mt19937 rng(5);
  const std::string_view alphabet = "0123456789xXaAfF..";
  int accepted = 0;
  for (int i = 0; i < 200000; ++i) {
    std::string s(1 + rng() % 14, '0');
    for (auto& c : s) c = alphabet[rng() % alphabet.size()];
    in_addr out{};
    if (inet_aton(s.c_str(), &out) == 0) continue;
    ++accepted;
    auto d = decide_host(list, s, 443);
    EXPECT_EQ(d.allowed, s == "1.2.3.4") << s << ": " << d.reason;
  }
  EXPECT_GT(accepted, 1000);
}

// Nothing whose last label starts with a digit is sent to the resolver as a name.
TEST(EgressDecideHost, NumericLookingNamesAreRefused) {
  const auto list = must_build({"*.example.org"});
  EXPECT_FALSE(decide_host(list, "a.example.org.1", 443).allowed);
  EXPECT_FALSE(decide_host(list, "1.example.org.0x1", 443).allowed);
  EXPECT_TRUE(decide_host(list, "1.example.org", 443).allowed);
}

TEST(EgressDecideHost, MalformedIpv6Literals) {
  const auto list = must_build({"[::1]"});
  for (std::string_view host : {"[", "[]", "[::1", "::1]", "[::1%lo]", "[fe80::1%25eth0]",
                                "[1.2.3.4]", "[::1]x", "[:::1]"}) {
    EXPECT_FALSE(decide_host(list, host, 443).allowed) << host;
  }
  EXPECT_TRUE(decide_host(list, "[::1]", 443).allowed);
  EXPECT_TRUE(decide_host(list, "[0:0:0:0:0:0:0:1]", 443).allowed);
}

TEST(EgressAllowlistBuild, RefusesBadEntries) {
  for (std::string bad : {"*", "*.com", "*.", "a.*.com", "*example.org", "api.example.com:443",
                          "0x7f.1", "127.1", "2130706433", "[::1", "[nope]", "::g", "",
                          "exa mple.com", "fe80::1%eth0", "a..b.com", "1.2.3.4.5"}) {
    std::string err;
    EXPECT_FALSE(EgressAllowlist::from_hosts({bad}, &err).has_value()) << bad;
    EXPECT_NE(err.find(bad.empty() ? "\"\"" : bad), std::string::npos) << err;
  }
}

TEST(EgressAllowlistBuild, EmptyListDeniesEverything) {
  const auto list = must_build({});
  EXPECT_FALSE(decide_host(list, "example.com", 443).allowed);
  EXPECT_FALSE(decide_host(list, "1.1.1.1", 443).allowed);
}

TEST(EgressAllowlistBuild, Ipv6EntriesWithOrWithoutBrackets) {
  const auto list = must_build({"2001:db8::1", "[2001:db8::2]", "::ffff:198.51.100.9"});
  EXPECT_TRUE(list.lists_address(ip("2001:db8::1")));
  EXPECT_TRUE(list.lists_address(ip("2001:db8::2")));
  // A mapped entry and its IPv4 address are one address.
  EXPECT_TRUE(list.lists_address(ip("198.51.100.9")));
  EXPECT_TRUE(decide_host(list, "198.51.100.9", 443).allowed);
}

TEST(EgressForbiddenRange, Ipv4) {
  for (std::string_view a :
       {"0.0.0.0",         "0.1.2.3",         "10.0.0.1",   "10.255.255.255",
        "100.64.0.1",      "100.127.255.254", "127.0.0.1",  "127.255.0.1",
        "169.254.169.254", "169.254.0.1",     "172.16.0.1", "172.31.255.255",
        "192.168.1.1",     "192.0.0.8",       "198.18.0.1", "198.19.255.255",
        "224.0.0.1",       "239.255.255.250", "240.0.0.1",  "255.255.255.255"}) {
    EXPECT_TRUE(is_forbidden_destination(ip(a))) << a;
  }
  for (std::string_view a : {"1.1.1.1", "8.8.8.8", "100.63.255.255", "100.128.0.0",
                             "172.15.255.255", "172.32.0.0", "192.167.1.1", "192.169.0.0",
                             "169.253.255.255", "198.20.0.0", "223.255.255.255", "11.0.0.1"}) {
    EXPECT_FALSE(is_forbidden_destination(ip(a))) << a;
  }
}

TEST(EgressForbiddenRange, Ipv6) {
  for (std::string_view a : {"::", "::1", "fc00::1", "fd12:3456::1", "fe80::1", "febf::1",
                             "fec0::1", "ff02::1", "100::1", "64:ff9b:1::1",
                             // IPv4 carried in IPv6 is judged as that IPv4 address
                             "::ffff:127.0.0.1", "::ffff:169.254.169.254", "::ffff:10.0.0.1",
                             "::ffff:192.168.0.1", "::127.0.0.1", "64:ff9b::10.0.0.1",
                             "64:ff9b::a9fe:a9fe", "2002:7f00:1::1", "2002:c0a8:101::1"}) {
    EXPECT_TRUE(is_forbidden_destination(ip(a))) << a;
  }
  for (std::string_view a : {"2606:4700::1111", "2001:4860:4860::8888", "::ffff:8.8.8.8",
                             "64:ff9b::8.8.8.8", "2002:808:808::1", "fbff::1", "fe7f::1"}) {
    EXPECT_FALSE(is_forbidden_destination(ip(a))) << a;
  }
}

TEST(EgressForbiddenRange, ReasonNamesTheRange) {
  auto r = forbidden_range(ip("169.254.169.254"));
  ASSERT_TRUE(r.has_value());
  EXPECT_NE(r->find("169.254.0.0/16"), std::string::npos) << *r;
  auto m = forbidden_range(ip("::ffff:10.9.8.7"));
  ASSERT_TRUE(m.has_value());
  EXPECT_NE(m->find("10.0.0.0/8"), std::string::npos) << *m;
}

TEST(EgressDecideAddress, ForbiddenUnlessListedOrOverridden) {
  const auto list = must_build({"api.example.com", "10.1.2.3"});
  EXPECT_FALSE(decide_address(list, ip("10.9.9.9"), AddressSource::dns).allowed);
  EXPECT_FALSE(decide_address(list, ip("::ffff:10.9.9.9"), AddressSource::dns).allowed);
  EXPECT_FALSE(decide_address(list, ip("::1"), AddressSource::dns).allowed);
  EXPECT_TRUE(decide_address(list, ip("10.1.2.3"), AddressSource::dns).allowed);
  EXPECT_TRUE(decide_address(list, ip("::ffff:10.1.2.3"), AddressSource::dns).allowed);
  EXPECT_TRUE(decide_address(list, ip("127.0.0.1"), AddressSource::resolver_override).allowed);
  EXPECT_TRUE(decide_address(list, ip("93.184.216.34"), AddressSource::dns).allowed);
  auto d = decide_address(list, ip("169.254.169.254"), AddressSource::dns);
  EXPECT_NE(d.reason.find("link-local"), std::string::npos) << d.reason;
}

TEST(EgressIpAddress, ParseIsStrict) {
  EXPECT_TRUE(IpAddress::parse("1.2.3.4").has_value());
  EXPECT_TRUE(IpAddress::parse("::1").has_value());
  for (std::string_view bad : {"1.2.3", "01.2.3.4", "1.2.3.4 ", "0x1.2.3.4", "256.1.1.1", "[::1]",
                               "::1%lo", "", "localhost"}) {
    EXPECT_FALSE(IpAddress::parse(bad).has_value()) << bad;
  }
  EXPECT_EQ(ip("2001:DB8::1").to_string(), "2001:db8::1");
}

TEST(EgressConnectTarget, Parses) {
  auto t = parse_connect_target("api.example.com:443");
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->host, "api.example.com");
  EXPECT_EQ(t->port, 443);
  auto v6 = parse_connect_target("[2001:db8::1]:80");
  ASSERT_TRUE(v6.has_value());
  EXPECT_EQ(v6->host, "[2001:db8::1]");
  EXPECT_EQ(v6->port, 80);
  for (std::string_view bad :
       {"api.example.com", "api.example.com:", ":443", "a.com:0", "a.com:65536", "a.com:+443",
        "a.com:443 ", "a.com:0443x", "2001:db8::1:443", "[2001:db8::1]443", "[2001:db8::1]",
        "a.com:1234567", "/path", "http://a.com:443"}) {
    EXPECT_FALSE(parse_connect_target(bad).has_value()) << bad;
  }
}

}  // namespace
}  // namespace toolwarden::policy
