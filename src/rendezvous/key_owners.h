// Who may write which key of gpudiag's store, so that on a store without a
// job secret a record is only believed from the connection that claimed its
// rank (store_plane.h lists the keys).
//
// Every connection claims a rank at its handshake (or none: a launcher). The
// first connection to claim rank r owns it for the life of the store; a
// later one claiming r is a duplicate (a second process with the same RANK,
// or an outsider posing as it). With ownership on:
//   claim/<r>             the owner of r; a duplicate of r may only ADD to it,
//                         so it learns that it is one (duplicate RANK)
//   hello/<r> phase/<r> bye/<r> cp/<n>/<r>
//                         the owner of r only
//   cp/<n>/digest         the owner of rank 0 (the judge)
//   failures failure/<n>  owners of any rank, and launchers where allowed
//   dead/<r>              launchers where allowed
//   server duplicates     nobody: the server writes them itself
//   anything else         any connection
// Ranks beyond the world size own nothing and may write only their own
// rank's keys (a WORLD_SIZE mismatch is diagnosed from their records).
// Without ownership (unit tests, tools that use the store generically) any
// connection writes any key except the server's own.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gpudiag {

class KeyOwners {
 public:
  /// `world_size` 0 turns ownership off.
  KeyOwners(int world_size, bool launchers_allowed);

  /// Connection `conn` (peer "ip:port") completed its handshake claiming
  /// `rank` (storewire::kNoRank for a launcher). Returns, for a duplicate
  /// claim, the new text of the server's `duplicates` key.
  std::optional<std::string> greeted(std::uint64_t conn, std::uint32_t rank,
                                     const std::string& peer);

  /// Why connection `conn`, which claimed `rank`, may not SET (or ADD to)
  /// `key`; nullopt when it may.
  std::optional<std::string> refuse(std::uint64_t conn, std::uint32_t rank, const std::string& key,
                                    bool is_add) const;

  /// What an ADD to `key` from `conn` (which claimed `rank`) answers when
  /// `key` is that rank's claim: 1 for its owner, 2 for a duplicate, whatever
  /// the order the two ADDs arrive in (ownership goes by handshake order).
  std::optional<std::int64_t> claim_answer(std::uint64_t conn, std::uint32_t rank,
                                           const std::string& key) const;

  /// `conn` is the first connection that claimed `rank` (within the world).
  bool is_owner(std::uint64_t conn, std::uint32_t rank) const;

 private:
  bool owns(std::uint64_t conn, std::uint32_t rank) const;

  std::vector<std::uint64_t> owner_;  ///< by rank; 0 while unclaimed (connection ids start at 1)
  bool launchers_ = false;
  std::vector<std::string> duplicates_;  ///< "rank 1 (again, from 10.0.0.5:4242)", a few
};

}  // namespace gpudiag
