// fieldhub.h compiles as C++11 with -Wall -Wextra -Werror -pedantic, and its
// functions get C linkage.
#include <fieldhub.h>

static_assert(sizeof(fh_frame) == 72, "fh_frame is struct canfd_frame");
static_assert(alignof(fh_frame) == 8, "fh_frame is aligned like struct canfd_frame");

int header_cxx11_uses_the_api();

int header_cxx11_uses_the_api() {
    fh_frame frame = fh_frame();
    int (*send)(fh_client *, fh_port, const fh_frame *, int) = &fh_send;
    return frame.len + (send != nullptr ? 0 : 1) + (fh_strerror(FH_OK) != nullptr ? 0 : 1);
}
