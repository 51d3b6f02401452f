#pragma once

/// @file test_certificate.hpp
/// A self-signed certificate for `localhost` and 127.0.0.1 and its key,
/// made by the `openssl` command at test time in a directory of the test's.

#include <sys/stat.h>

#include <cstdlib>
#include <string>

#include <boost/test/unit_test.hpp>

namespace castellan::test {

struct test_certificate {
  std::string cert_file; ///< PEM; also the CA file a client trusts
  std::string key_file;  ///< PEM, mode 0600
};

/// Makes `cert.pem` and `key.pem` (an EC P-256 key) in `dir`, valid for a
/// day for the names localhost and 127.0.0.1.
inline test_certificate make_test_certificate(const std::string& dir,
                                              const std::string& name = "cert") {
  test_certificate c{dir + "/" + name + ".pem", dir + "/" + name + "-key.pem"};
  const std::string cmd = "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 "
                          "-nodes -days 1 -subj /CN=localhost -addext "
                          "subjectAltName=DNS:localhost,IP:127.0.0.1 -keyout '" +
                          c.key_file + "' -out '" + c.cert_file + "' 2>/dev/null";
  BOOST_REQUIRE_MESSAGE(std::system(cmd.c_str()) == 0, "openssl req failed: " << cmd);
  BOOST_REQUIRE(::chmod(c.key_file.c_str(), 0600) == 0);
  return c;
}

} // namespace castellan::test
