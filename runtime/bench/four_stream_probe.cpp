// Four-stream probe (issue 14, session 15): the access pattern of a dense 2-wire gate on two
// adjacent middle wires (ECR on bits b+1, b: four streams 2^b amplitudes apart, each a run of
// 2^b, together every line of each 4 * 2^b), as a trivial negation in lock step, each variant
// timed against a full negation pass timed just before it (CPU time of this thread, median
// of the ratios over rounds; 1.0 = the bound). Variants: software prefetch of the next tile
// (none, prefetcht2 in bursts of 64 lines per 16 iterations = the runtime's forEachRunAhead,
// spread 4 lines per iteration, prefetcht0, prefetchnta, demand loads, two tiles ahead),
// groups of G lines per stream, and reads or writes alone. Not part of the build; AVX-512:
//   g++ -O2 -march=native -o /tmp/q4 runtime/bench/four_stream_probe.cpp
//   /tmp/q4 [n=24] [b=10] [rounds=9]
// Session 15, AMD EPYC Zen 4 (KVM), n = 24, load 5-7: b = 10 none 1.31, burst 1.22-1.27,
// spread 1.10-1.19, t0 1.40, nta 1.36, demand 2.0; reads alone 1.07 (sequential 0.84),
// writes alone 1.19 (sequential 0.98); b = 13 none 1.03.
#include <immintrin.h>
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <ctime>
#include <sys/mman.h>
#include <vector>
#include <algorithm>
#include <functional>
#include <string>
static double now(){timespec t;clock_gettime(CLOCK_THREAD_CPUTIME_ID,&t);return t.tv_sec+1e-9*t.tv_nsec;}
static uint64_t SIZE; static double* sv; static int B;
static inline __m512d neg(__m512d x){return _mm512_xor_pd(x,_mm512_set1_pd(-0.0));}
__attribute__((noinline)) void full(){ for(uint64_t i=0;i<2*SIZE;i+=8){ _mm512_store_pd(sv+i,neg(_mm512_load_pd(sv+i)));} }
__attribute__((noinline)) double fullR(){ __m512d s=_mm512_setzero_pd(); for(uint64_t i=0;i<2*SIZE;i+=8) s=_mm512_add_pd(s,_mm512_load_pd(sv+i)); return _mm512_reduce_add_pd(s);}
// mode: 0 none, 1 next tile t2 burst per 16 iters, 2 next tile t2 spread (4 per iter), 3 prefetchw spread
template<int PF> __attribute__((noinline)) void quad(){
  const uint64_t R=1ull<<B; // amps per stream
  const uint64_t Rd=2*R;    // doubles
  for(uint64_t base=0; base<SIZE; base+=4*R){
    double* p=sv+2*base; double* nx=p+4*Rd;
    for(uint64_t i=0;i<Rd;i+=8){
      if(PF==1 && (i%128)==0){ uint64_t piece=i/128; for(int l=0;l<64;++l) _mm_prefetch((const char*)(nx+piece*512+8*l),_MM_HINT_T2);}
      if(PF==2){ for(int l=0;l<4;++l) _mm_prefetch((const char*)(nx+4*i+8*l),_MM_HINT_T2);}
      if(PF==4){ const double* t=nx+4*i; double x=t[0]+t[8]+t[16]+t[24]; asm volatile(""::"x"(x)); }
      if(PF==5){ for(int l=0;l<4;++l) _mm_prefetch((const char*)(nx+4*Rd+4*i+8*l),_MM_HINT_T2);}
      if(PF==6){ for(int l=0;l<4;++l) _mm_prefetch((const char*)(nx+4*i+8*l),_MM_HINT_NTA);}
      if(PF==3){ for(int l=0;l<4;++l) _mm_prefetch((const char*)(nx+4*i+8*l),_MM_HINT_T0);}
      __m512d a=_mm512_load_pd(p+i),b=_mm512_load_pd(p+Rd+i),c=_mm512_load_pd(p+2*Rd+i),d=_mm512_load_pd(p+3*Rd+i);
      _mm512_store_pd(p+i,neg(c)); _mm512_store_pd(p+Rd+i,neg(d)); _mm512_store_pd(p+2*Rd+i,neg(a)); _mm512_store_pd(p+3*Rd+i,neg(b));
    }
  }
}
__attribute__((noinline)) double quadR(){
  const uint64_t Rd=2ull<<B; __m512d s=_mm512_setzero_pd();
  for(uint64_t base=0; base<SIZE; base+=4*(Rd/2)){ double* p=sv+2*base;
    for(uint64_t i=0;i<Rd;i+=8) s=_mm512_add_pd(s,_mm512_add_pd(_mm512_add_pd(_mm512_load_pd(p+i),_mm512_load_pd(p+Rd+i)),_mm512_add_pd(_mm512_load_pd(p+2*Rd+i),_mm512_load_pd(p+3*Rd+i))));}
  return _mm512_reduce_add_pd(s);}
// grouped: G lines per stream loaded, then stored stream by stream
template<int G> __attribute__((noinline)) void quadG(){
  const uint64_t Rd=2ull<<B;
  for(uint64_t base=0; base<SIZE; base+=4*(Rd/2)){ double* p=sv+2*base; double* nx=p+4*Rd;
    for(uint64_t i=0;i<Rd;i+=8*G){
      __m512d v[4][G];
      for(int j=0;j<4;++j) for(int g=0;g<G;++g) v[j][g]=_mm512_load_pd(p+j*Rd+i+8*g);
      for(int j=0;j<4;++j) for(int g=0;g<G;++g) _mm512_store_pd(p+j*Rd+i+8*g,neg(v[j^2][g]));
    }
  }
}
__attribute__((noinline)) void writeSeq(){ for(uint64_t i=0;i<2*SIZE;i+=8) _mm512_store_pd(sv+i,_mm512_set1_pd(1.0)); }
__attribute__((noinline)) void writeQuad(){ const uint64_t Rd=2ull<<B;
  for(uint64_t base=0; base<SIZE; base+=4*(Rd/2)){ double* p=sv+2*base;
    for(uint64_t i=0;i<Rd;i+=8) for(int j=0;j<4;++j) _mm512_store_pd(p+j*Rd+i,_mm512_set1_pd(1.0));}}
volatile double sink;
int main(int argc,char**argv){
  int n=argc>1?atoi(argv[1]):24; B=argc>2?atoi(argv[2]):10; int rounds=argc>3?atoi(argv[3]):9;
  SIZE=1ull<<n; size_t bytes=SIZE*16;
  sv=(double*)aligned_alloc(1<<21,bytes); madvise(sv,bytes,MADV_HUGEPAGE);
  for(uint64_t i=0;i<2*SIZE;++i) sv[i]=1.0;
  std::vector<std::pair<std::string,std::function<void()>>> v={
    {"full",full},{"quad nopf",quad<0>},{"quad t2 burst",quad<1>},{"quad t2 spread",quad<2>},{"quad t0 spread",quad<3>},
    {"quadG2",quadG<2>},{"quadG4",quadG<4>},{"fullR (read)",[]{sink=fullR();}},{"quadR (read)",[]{sink=quadR();}},
    {"writeSeq",writeSeq},{"writeQuad",writeQuad},
    {"demand next",quad<4>},{"t2 spread 2 tiles",quad<5>},{"nta spread",quad<6>}};
  std::vector<std::vector<double>> r(v.size());
  for(int k=0;k<rounds;++k) for(size_t j=0;j<v.size();++j){ double t0=now(); full(); double tb=now()-t0; t0=now(); v[j].second(); double tk=now()-t0; r[j].push_back(tk/tb);}
  for(size_t j=0;j<v.size();++j){ auto x=r[j]; std::sort(x.begin(),x.end()); printf("%-16s med %.3f  (q25 %.3f q75 %.3f)\n",v[j].first.c_str(),x[x.size()/2],x[x.size()/4],x[3*x.size()/4]);}
}
