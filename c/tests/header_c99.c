/* fieldhub.h compiles alone under -std=c99 -Wall -Wextra -Werror -pedantic. */
#include <fieldhub.h>

int header_c99_uses_every_type(void);

int header_c99_uses_every_type(void) {
    fh_frame frame = {0};
    fh_meta meta = {0};
    fh_filter filter = {0, 0};
    fh_port_status status = {0};
    fh_port port = 0;
    fh_status ok = FH_OK;
    (void)meta;
    (void)filter;
    (void)status;
    return frame.len + (int)port + (int)ok;
}
